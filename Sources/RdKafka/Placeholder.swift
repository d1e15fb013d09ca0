enum RdKafkaPlaceholder {}

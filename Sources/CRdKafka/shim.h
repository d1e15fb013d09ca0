#ifndef REDDOT_CRDKAFKA_SHIM_H
#define REDDOT_CRDKAFKA_SHIM_H
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/* rd_kafka_producev is variadic, which Swift cannot call: this wraps one fixed use of it.
 * RD_KAFKA_MSG_F_COPY: librdkafka copies key and value. On success librdkafka owns `headers`
 * (may be NULL); on failure the caller still owns them. */
static inline rd_kafka_resp_err_t reddot_produce(rd_kafka_t *rk, const char *topic, int32_t partition,
                                                 const void *key, size_t key_size,
                                                 const void *value, size_t value_size,
                                                 rd_kafka_headers_t *headers, void *opaque) {
    return rd_kafka_producev(rk,
                             RD_KAFKA_V_TOPIC(topic),
                             RD_KAFKA_V_PARTITION(partition),
                             RD_KAFKA_V_KEY(key, key_size),
                             RD_KAFKA_V_VALUE((void *)value, value_size),
                             RD_KAFKA_V_HEADERS(headers),
                             RD_KAFKA_V_OPAQUE(opaque),
                             RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                             RD_KAFKA_V_END);
}
#endif

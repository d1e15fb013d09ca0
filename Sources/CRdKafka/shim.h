#ifndef REDDOT_CRDKAFKA_SHIM_H
#define REDDOT_CRDKAFKA_SHIM_H
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#endif

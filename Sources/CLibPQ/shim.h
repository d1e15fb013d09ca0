#ifndef REDDOT_CLIBPQ_SHIM_H
#define REDDOT_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#include <poll.h>
#endif

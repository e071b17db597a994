/*
 * e2b_front.h - the E2B front (e2b_front.c), which the process layer
 * registers with the HTTP layer (nb_http_add_front) when it is compiled in
 * (NB_WITH_E2B; ./configure --disable-e2b leaves it out).
 */
#ifndef NB_E2B_FRONT_H
#define NB_E2B_FRONT_H

#include "http.h"

extern const struct nb_front nb_e2b_front;

#endif

/* SPDX-License-Identifier: MIT */
#pragma once

/* org.varlink.service, which every Varlink server offers: GetInfo and GetInterfaceDescription, as an
 * interface like any other (its methods parse their parameters with tables as ours do). A server lists
 * it among its interfaces, first: VARLINK_SERVICE_INTERFACE. */

#include "varlink.h"

#define VARLINK_SERVICE_N_METHODS 2
extern const struct varlink_method varlink_service_methods[VARLINK_SERVICE_N_METHODS];
extern const char varlink_service_description[];

#define VARLINK_SERVICE_INTERFACE                                                                          \
        {                                                                                                  \
                .name = "org.varlink.service", .description = varlink_service_description,                \
                .methods = varlink_service_methods, .n_methods = VARLINK_SERVICE_N_METHODS,                \
        }

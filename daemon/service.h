/* SPDX-License-Identifier: MIT */
#pragma once

/* The io.pressured interface: the methods' table and handlers. */

#include <stddef.h>

#include "varlink.h"

extern const struct varlink_interface service_interfaces[];
extern const size_t service_n_interfaces;

/* SPDX-License-Identifier: MIT */
#pragma once

/* The Varlink interface definition (daemon/io.pressured.varlink) as data, and JSON checked against it:
 * the one definition of the protocol that the daemon's tables, its codec and the library's decoders are
 * held to. Enough of the IDL for ours: types (structs and enums), methods and errors; fields of the
 * basic types, named types and arrays of them, optional with "?". Pure: json-c only. */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

enum idl_kind {
        IDL_BOOL,
        IDL_INT,
        IDL_FLOAT,
        IDL_STRING,
        IDL_OBJECT, /* "object": any JSON object */
        IDL_NAMED,  /* a type of the interface */
};

struct idl_field {
        char *name;
        bool optional, array;
        enum idl_kind kind;
        char *type_name; /* IDL_NAMED */
};

/* A struct's fields, or an enum's values (then fields are NULL). */
struct idl_struct {
        char *name;
        bool is_enum;
        struct idl_field *fields;
        size_t n_fields;
        char **values;
        size_t n_values;
};

struct idl_method {
        struct idl_struct in, out; /* named after the method */
};

struct idl_interface {
        char *name;
        struct idl_struct *types, *errors;
        size_t n_types, n_errors;
        struct idl_method *methods;
        size_t n_methods;
};

/* Parse a definition. On error, *ret_error (if given) says where and what; free() it. */
int idl_parse(const char *text, struct idl_interface **ret, char **ret_error);
void idl_free(struct idl_interface *i);

const struct idl_struct *idl_type(const struct idl_interface *i, const char *name);
const struct idl_method *idl_method(const struct idl_interface *i, const char *name);
const struct idl_struct *idl_error(const struct idl_interface *i, const char *name); /* short name */
const struct idl_field *idl_field(const struct idl_struct *s, const char *name);

/* A reader of a later peer's messages: fields it does not know are skipped, not refused (Varlink's
 * rule for adding optional fields). */
#define IDL_ALLOW_UNKNOWN (1u << 0)

/* Whether o is a valid value of s: every field known (unless IDL_ALLOW_UNKNOWN), every mandatory one
 * there and not null, each of the right type, named types checked all the way down. On -EPROTO,
 * *ret_error (if given) names the path and what is wrong ("state[0].scope.type: missing"); free() it. */
int idl_validate(const struct idl_interface *i, const struct idl_struct *s, struct json_object *o, unsigned flags,
                 char **ret_error);

/* SPDX-License-Identifier: MIT */
#include "varlink_idl.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* ---- tokens ---- */

struct lexer {
        const char *p;
        unsigned line;
        char *error;
};

static int lex_fail(struct lexer *l, const char *what) {
        if (!l->error && asprintf(&l->error, "line %u: %s", l->line, what) < 0)
                l->error = NULL;
        return -EINVAL;
}

static void skip_space(struct lexer *l) {
        for (;;) {
                while (isspace((unsigned char) *l->p)) {
                        if (*l->p == '\n')
                                l->line++;
                        l->p++;
                }
                if (*l->p != '#')
                        return;
                while (*l->p && *l->p != '\n')
                        l->p++;
        }
}

/* The next word ([A-Za-z0-9_.]), or NULL. */
static char *word(struct lexer *l) {
        skip_space(l);
        const char *b = l->p;
        while (isalnum((unsigned char) *l->p) || *l->p == '_' || *l->p == '.')
                l->p++;
        return l->p > b ? strndup(b, (size_t) (l->p - b)) : NULL;
}

static bool accept(struct lexer *l, const char *tok) {
        skip_space(l);
        size_t n = strlen(tok);
        if (strncmp(l->p, tok, n) != 0)
                return false;
        l->p += n;
        return true;
}

/* ---- definitions ---- */

static void struct_done(struct idl_struct *s) {
        for (size_t i = 0; i < s->n_fields; i++) {
                free(s->fields[i].name);
                free(s->fields[i].type_name);
        }
        free(s->fields);
        for (size_t i = 0; i < s->n_values; i++)
                free(s->values[i]);
        free(s->values);
        free(s->name);
}

static int field_type(struct lexer *l, struct idl_field *f) {
        static const struct {
                const char *name;
                enum idl_kind kind;
        } basic[] = { { "bool", IDL_BOOL },     { "int", IDL_INT },       { "float", IDL_FLOAT },
                      { "string", IDL_STRING }, { "object", IDL_OBJECT } };
        f->optional = accept(l, "?");
        f->array = accept(l, "[]");
        char *t = word(l);
        if (!t)
                return lex_fail(l, "type expected");
        f->kind = IDL_NAMED;
        for (size_t i = 0; i < ELEMENTSOF(basic); i++)
                if (streq(t, basic[i].name))
                        f->kind = basic[i].kind;
        if (f->kind == IDL_NAMED)
                f->type_name = t;
        else
                free(t);
        return 0;
}

/* "( ... )" after its name: fields "name: type", or enum values "a, b". */
static int struct_body(struct lexer *l, struct idl_struct *s) {
        if (!accept(l, "("))
                return lex_fail(l, "\"(\" expected");
        if (accept(l, ")"))
                return 0;
        do {
                char *name = word(l);
                if (!name)
                        return lex_fail(l, "a name expected");
                if (!accept(l, ":")) {
                        char **v = realloc(s->values, (s->n_values + 1) * sizeof(char *));
                        if (!v) {
                                free(name);
                                return -ENOMEM;
                        }
                        s->values = v;
                        s->values[s->n_values++] = name;
                        s->is_enum = true;
                        continue;
                }
                struct idl_field *f = realloc(s->fields, (s->n_fields + 1) * sizeof(*f));
                if (!f) {
                        free(name);
                        return -ENOMEM;
                }
                s->fields = f;
                f = &s->fields[s->n_fields++];
                *f = (struct idl_field){ .name = name };
                int r = field_type(l, f);
                if (r < 0)
                        return r;
        } while (accept(l, ","));
        if (s->is_enum && s->n_fields > 0)
                return lex_fail(l, "fields and enum values mixed");
        return accept(l, ")") ? 0 : lex_fail(l, "\")\" expected");
}

static struct idl_struct *grow(struct idl_struct **a, size_t *n) {
        struct idl_struct *b = realloc(*a, (*n + 1) * sizeof(**a));
        if (!b)
                return NULL;
        *a = b;
        b[*n] = (struct idl_struct){};
        return &b[(*n)++];
}

static int definition(struct lexer *l, struct idl_interface *i, const char *keyword) {
        char *name = word(l);
        if (!name)
                return lex_fail(l, "a name expected");
        struct idl_struct *s = NULL;
        if (streq(keyword, "type"))
                s = grow(&i->types, &i->n_types);
        else if (streq(keyword, "error"))
                s = grow(&i->errors, &i->n_errors);
        if (streq(keyword, "method")) {
                struct idl_method *m = realloc(i->methods, (i->n_methods + 1) * sizeof(*m));
                if (!m) {
                        free(name);
                        return -ENOMEM;
                }
                i->methods = m;
                m = &m[i->n_methods++];
                *m = (struct idl_method){ .in.name = name, .out.name = strdup(name) };
                int r = struct_body(l, &m->in);
                if (r >= 0 && !accept(l, "->"))
                        r = lex_fail(l, "\"->\" expected");
                return r < 0 ? r : struct_body(l, &m->out);
        }
        if (!s) {
                free(name);
                return -ENOMEM;
        }
        s->name = name;
        return struct_body(l, s);
}

int idl_parse(const char *text, struct idl_interface **ret, char **ret_error) {
        struct lexer l = { .p = text, .line = 1 };
        struct idl_interface *i = calloc(1, sizeof(*i));
        int r = i ? 0 : -ENOMEM;

        if (r >= 0 && !(accept(&l, "interface") && (i->name = word(&l))))
                r = lex_fail(&l, "\"interface NAME\" expected first");
        while (r >= 0) {
                skip_space(&l);
                if (!*l.p)
                        break;
                char *kw = word(&l);
                if (!kw || (!streq(kw, "type") && !streq(kw, "method") && !streq(kw, "error")))
                        r = lex_fail(&l, "type, method or error expected");
                else
                        r = definition(&l, i, kw);
                free(kw);
        }
        if (r < 0) {
                idl_free(i);
                if (ret_error)
                        *ret_error = l.error;
                else
                        free(l.error);
                return r;
        }
        *ret = i;
        return 0;
}

void idl_free(struct idl_interface *i) {
        if (!i)
                return;
        for (size_t k = 0; k < i->n_types; k++)
                struct_done(&i->types[k]);
        for (size_t k = 0; k < i->n_errors; k++)
                struct_done(&i->errors[k]);
        for (size_t k = 0; k < i->n_methods; k++) {
                struct_done(&i->methods[k].in);
                struct_done(&i->methods[k].out);
        }
        free(i->types);
        free(i->errors);
        free(i->methods);
        free(i->name);
        free(i);
}

static const struct idl_struct *find(const struct idl_struct *a, size_t n, const char *name) {
        for (size_t k = 0; k < n; k++)
                if (streq(a[k].name, name))
                        return &a[k];
        return NULL;
}

const struct idl_struct *idl_type(const struct idl_interface *i, const char *name) {
        return find(i->types, i->n_types, name);
}

const struct idl_struct *idl_error(const struct idl_interface *i, const char *name) {
        return find(i->errors, i->n_errors, name);
}

const struct idl_method *idl_method(const struct idl_interface *i, const char *name) {
        for (size_t k = 0; k < i->n_methods; k++)
                if (streq(i->methods[k].in.name, name))
                        return &i->methods[k];
        return NULL;
}

const struct idl_field *idl_field(const struct idl_struct *s, const char *name) {
        for (size_t k = 0; k < s->n_fields; k++)
                if (streq(s->fields[k].name, name))
                        return &s->fields[k];
        return NULL;
}

/* ---- validation ---- */

static int invalid(char **ret_error, const char *path, const char *what) {
        if (ret_error && !*ret_error && asprintf(ret_error, "%s: %s", *path ? path : "(top)", what) < 0)
                *ret_error = NULL;
        return -EPROTO;
}

static int validate_struct(const struct idl_interface *i, const struct idl_struct *s, struct json_object *o,
                           const char *path, unsigned flags, char **ret_error);

static int validate_value(const struct idl_interface *i, const struct idl_field *f, struct json_object *v,
                          const char *path, unsigned flags, char **ret_error) {
        switch (f->kind) {
        case IDL_BOOL:
                return json_object_is_type(v, json_type_boolean) ? 0 : invalid(ret_error, path, "not a bool");
        case IDL_INT:
                return json_object_is_type(v, json_type_int) ? 0 : invalid(ret_error, path, "not an int");
        case IDL_FLOAT:
                return json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)
                               ? 0
                               : invalid(ret_error, path, "not a number");
        case IDL_STRING:
                return json_object_is_type(v, json_type_string) ? 0 : invalid(ret_error, path, "not a string");
        case IDL_OBJECT:
                return json_object_is_type(v, json_type_object) ? 0 : invalid(ret_error, path, "not an object");
        case IDL_NAMED:
                break;
        }
        const struct idl_struct *t = idl_type(i, f->type_name);
        if (!t)
                return invalid(ret_error, path, "of a type the interface does not define");
        if (!t->is_enum)
                return validate_struct(i, t, v, path, flags, ret_error);
        if (!json_object_is_type(v, json_type_string))
                return invalid(ret_error, path, "not a string");
        for (size_t k = 0; k < t->n_values; k++)
                if (streq(t->values[k], json_object_get_string(v)))
                        return 0;
        return invalid(ret_error, path, "not a value of its enum");
}

static int validate_field(const struct idl_interface *i, const struct idl_field *f, struct json_object *v,
                          const char *path, unsigned flags, char **ret_error) {
        if (!f->array)
                return validate_value(i, f, v, path, flags, ret_error);
        if (!json_object_is_type(v, json_type_array))
                return invalid(ret_error, path, "not an array");
        for (size_t k = 0; k < json_object_array_length(v); k++) {
                char item[512];
                if (snprintf(item, sizeof(item), "%s[%zu]", path, k) >= (int) sizeof(item))
                        return invalid(ret_error, path, "nested too deep");
                int r = validate_value(i, f, json_object_array_get_idx(v, k), item, flags, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int validate_struct(const struct idl_interface *i, const struct idl_struct *s, struct json_object *o,
                           const char *path, unsigned flags, char **ret_error) {
        char sub[512];
        if (!json_object_is_type(o, json_type_object))
                return invalid(ret_error, path, "not an object");
        json_object_object_foreach(o, key, val) {
                if (snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", key) >= (int) sizeof(sub))
                        return invalid(ret_error, path, "nested too deep");
                const struct idl_field *f = idl_field(s, key);
                if (!f && (flags & IDL_ALLOW_UNKNOWN))
                        continue;
                if (!f)
                        return invalid(ret_error, sub, "not a field of its type");
                if (!val && f->optional)
                        continue;
                if (!val)
                        return invalid(ret_error, sub, "null");
                int r = validate_field(i, f, val, sub, flags, ret_error);
                if (r < 0)
                        return r;
        }
        for (size_t k = 0; k < s->n_fields; k++) {
                struct json_object *v;
                if (snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", s->fields[k].name) >= (int) sizeof(sub))
                        return invalid(ret_error, path, "nested too deep");
                if (!s->fields[k].optional && (!json_object_object_get_ex(o, s->fields[k].name, &v) || !v))
                        return invalid(ret_error, sub, "missing");
        }
        return 0;
}

int idl_validate(const struct idl_interface *i, const struct idl_struct *s, struct json_object *o, unsigned flags,
                 char **ret_error) {
        if (ret_error)
                *ret_error = NULL;
        return validate_struct(i, s, o, "", flags, ret_error);
}

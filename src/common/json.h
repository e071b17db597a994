/*
 * json.h - the one JSON helper: capped parsing with field/type checks, and
 * generation that never emits invalid UTF-8.
 *
 * yajl_tree_parse recurses without a depth limit and needs a NUL-terminated
 * buffer, so every parse goes through nb_json_parse, which checks the nesting
 * depth with a flat scan first. Command output can be any bytes: strings
 * written with nb_json_str repair invalid UTF-8 (U+FFFD per bad byte).
 */
#ifndef NB_JSON_H
#define NB_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

/*
 * Parse text (len bytes, NUL at text[len] required). Whitespace-only text
 * gives *out = NULL and 0 (an absent body). Returns -1 with a message for
 * invalid JSON or nesting deeper than max_depth.
 */
int nb_json_parse(const char *text, size_t len, unsigned max_depth, yajl_val *out, char *err,
                  size_t errlen);

/* Deepest nesting of arrays/objects in text, or -1 if brackets don't match. */
int nb_json_depth(const char *text, size_t len);

/*
 * Does JSON text (len bytes) hold an escaped NUL (\u0000)? yajl hands such a
 * string over NUL-terminated, so a path or a command would silently end
 * there: handlers that pass strings on refuse the body instead. An escaped
 * backslash followed by "u0000" is not one.
 */
int nb_json_has_nul(const char *text, size_t len);

/* Accepted JSON types for a field, as a bit mask. */
#define NB_JT_STRING 0x01
#define NB_JT_INT 0x02    /* a number without fraction or exponent */
#define NB_JT_NUMBER 0x04 /* any number */
#define NB_JT_BOOL 0x08
#define NB_JT_OBJECT 0x10
#define NB_JT_ARRAY 0x20
#define NB_JT_NULL 0x40

struct nb_jfield {
    const char *name;
    unsigned types; /* NB_JT_* mask */
    yajl_val val;   /* out: the value, or NULL when absent (or null and NB_JT_NULL allowed) */
};

/*
 * Check obj (NULL = empty object) against the field list: every key must be
 * listed (unknown keys are refused: a typo should not be silently ignored)
 * and of an allowed type. Fills fields[i].val. Returns 0 or -1 + message.
 */
int nb_json_fields(yajl_val obj, struct nb_jfield *fields, size_t n, char *err, size_t errlen);

/*
 * Is any key given twice in one object of v, at any depth? -1 with the
 * message nb_json_fields gives for it ("field \"K\" given twice"), else 0.
 * For bodies whose keys are not all checked by nb_json_fields (JSON-RPC's
 * envelope and the maps inside it), which yajl would take the first of.
 */
int nb_json_no_dup_keys(yajl_val v, char *err, size_t errlen);

/* String value of v, "" if v is not a string (never NULL). */
const char *nb_json_string(yajl_val v);

/* Integer value of a NB_JT_INT field; any other number saturates (NaN: 0);
 * v missing (NULL) or not a number: 0, as nb_json_string gives "". */
long long nb_json_int(yajl_val v);
double nb_json_double(yajl_val v);

/* A generator with UTF-8 validation on and beautify off. */
yajl_gen nb_json_gen(void);
/* The generated text as a NUL-terminated malloc'd string; frees g. */
char *nb_json_gen_take(yajl_gen g);
/* Write a string, replacing invalid UTF-8 and NUL-free; len bytes of s. */
void nb_json_str(yajl_gen g, const char *s, size_t len);
void nb_json_cstr(yajl_gen g, const char *s);
void nb_json_kv_str(yajl_gen g, const char *key, const char *value);
void nb_json_kv_int(yajl_gen g, const char *key, long long value);
void nb_json_kv_bool(yajl_gen g, const char *key, int value);
void nb_json_kv_double(yajl_gen g, const char *key, double value);
/* Re-emit a parsed tree (used for metadata kept as JSON text). */
void nb_json_tree(yajl_gen g, yajl_val v);

/* Copy of s with invalid UTF-8 sequences replaced by U+FFFD; *outlen set. */
char *nb_utf8_repair(const char *s, size_t len, size_t *outlen);

#endif

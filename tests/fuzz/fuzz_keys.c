/*
 * fuzz_keys.c - libFuzzer harness over the API keys file's parser
 * (nb_keys_parse, src/common/keys.c), which every worker runs on the
 * file whenever it changed.
 *
 * Input: the file's bytes. Checks: it parses or fails whole (an error
 * leaves no keys and names a line); every key it gives has a valid, unique
 * name and a known role; a parsed set written back with nb_key_format
 * parses again to the same keys. Anything else aborts (a finding).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nb_keys k, back;
    char err[256] = "", line[512];
    char *text;
    size_t len = 0;

    if (nb_keys_parse((const char *)data, size, &k, err, sizeof(err)) != 0) {
        if (k.n != 0 || k.v != NULL || strncmp(err, "line ", 5) != 0)
            abort();
        return 0;
    }
    text = malloc(k.n * sizeof(line) + 1);
    if (text == NULL)
        abort();
    for (size_t i = 0; i < k.n; i++) {
        if (!nb_key_name_valid(k.v[i].name) || !strcmp(k.v[i].name, NB_KEY_DEFAULT) ||
            (k.v[i].admin != 0 && k.v[i].admin != 1) || nb_keys_find(&k, k.v[i].name) != &k.v[i])
            abort();
        nb_key_format(&k.v[i], line, sizeof(line));
        len += (size_t)sprintf(text + len, "%s\n", line);
    }
    if (nb_keys_parse(text, len, &back, err, sizeof(err)) != 0 || back.n != k.n)
        abort();
    for (size_t i = 0; i < k.n; i++)
        if (memcmp(&back.v[i], &k.v[i], sizeof(k.v[i])) != 0)
            abort();
    nb_keys_free(&back);
    nb_keys_free(&k);
    free(text);
    return 0;
}

/*
 * fuzz_dockerfile.c - libFuzzer harness over the Dockerfile reader of
 * template builds (src/fcgi/engine/dockerfile.c), which reads a tenant's file and
 * writes the one Docker gets.
 *
 * Input: a Dockerfile. The resolver allows images named "ok..." as they
 * are, rewrites "own..." to "nanobox-tpl-x:<hex>", and refuses the rest.
 * Checks, when the file is accepted: the written file is accepted again
 * and written the same (Docker reads what nanobox checked: no instruction
 * changes meaning on a second reading), every image the second reading
 * names is one the first allowed or wrote, and no "own..." name reaches
 * the output; anything else aborts (a finding).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dockerfile.h"

#define SEEN_MAX 256

struct seen {
    char names[SEEN_MAX][1100];
    unsigned n;
    int second;
};

static int resolve(void *arg, const char *image, int from_line, char *out, size_t outlen,
                   struct nb_apierr *ae)
{
    struct seen *s = arg;
    (void)from_line;
    (void)ae;
    if (s->second) {
        /* the second reading may only meet what the first allowed or wrote */
        for (unsigned i = 0; i < s->n; i++)
            if (!strcmp(s->names[i], image))
                return 1;
        abort();
    }
    if (!strncmp(image, "ok", 2)) {
        if (s->n < SEEN_MAX)
            snprintf(s->names[s->n++], sizeof(s->names[0]), "%s", image);
        return 1;
    }
    if (!strncmp(image, "own", 3)) {
        snprintf(out, outlen, "nanobox-tpl-x:%032x", (unsigned)strlen(image));
        if (s->n < SEEN_MAX)
            snprintf(s->names[s->n++], sizeof(s->names[0]), "%s", out);
        return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nb_buf out1, out2;
    struct nb_apierr ae = {0};
    static struct seen s;
    char esc1, esc2;

    if (size > 16384)
        return 0;
    memset(&s, 0, sizeof(s));
    nb_buf_init(&out1, 8 * size + 4096);
    nb_buf_init(&out2, 8 * size + 4096);
    if (nb_dockerfile_rewrite((const char *)data, size, resolve, &s, &out1, &esc1, &ae) == 0) {
        if (s.n == SEEN_MAX)
            goto out; /* too many names to follow */
        s.second = 1;
        if (nb_dockerfile_rewrite(out1.data ? out1.data : "", out1.len, resolve, &s, &out2, &esc2,
                                  &ae) != 0)
            abort(); /* what nanobox wrote, nanobox refuses */
        if (esc1 != esc2 || out1.len != out2.len || memcmp(out1.data, out2.data, out1.len) != 0)
            abort(); /* a second reading changed it */
    }
out:
    nb_buf_free(&out1);
    nb_buf_free(&out2);
    return 0;
}

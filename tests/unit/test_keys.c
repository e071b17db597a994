/*
 * test_keys.c - the API keys file (keys.h): what a line holds, every way a
 * line is refused (with its number), the hash match, the mode check, and
 * that a written file reads back the same.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "keys.h"

/* SHA-256("test") */
#define H_TEST "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
/* SHA-256("other") */
#define H_OTHER "d9298a10d1b0735837dc4bd85dac641b0f3cef27a47e5d53a54f2f3f5b2fcffa"

static int parse(const char *text, struct nb_keys *k, char *err, size_t errlen)
{
    return nb_keys_parse(text, strlen(text), k, err, errlen);
}

static void test_lines_with_quotas_parse(void **state)
{
    struct nb_keys k;
    char err[256] = "";
    (void)state;
    assert_int_equal(parse("# team keys\n\n"
                           "alice user " H_TEST " max_sandboxes=3 max_memory=2g max_cpus=1.5 "
                           "max_ports=4 max_templates=2 rate=10r/s  # trailing comment\n"
                           "ops\tadmin\t" H_OTHER "\r\n",
                           &k, err, sizeof(err)),
                     0);
    assert_int_equal(k.n, 2);
    assert_string_equal(k.v[0].name, "alice");
    assert_int_equal(k.v[0].admin, 0);
    assert_int_equal(k.v[0].max_sandboxes, 3);
    assert_true(k.v[0].max_memory == 2ull << 30);
    assert_true(k.v[0].max_nano_cpus == 1500000000ull);
    assert_int_equal(k.v[0].max_ports, 4);
    assert_int_equal(k.v[0].max_templates, 2);
    assert_string_equal(k.v[0].rate, "10r/s");
    assert_string_equal(k.v[1].name, "ops");
    assert_int_equal(k.v[1].admin, 1);
    assert_int_equal(k.v[1].max_sandboxes, 0);
    nb_keys_free(&k);
}

static void test_the_key_is_matched_by_its_hash(void **state)
{
    struct nb_keys k;
    char err[256];
    const struct nb_key *m;
    (void)state;
    assert_int_equal(parse("a user " H_TEST "\nb admin " H_OTHER "\n", &k, err, sizeof(err)), 0);
    m = nb_keys_match(&k, "test");
    assert_non_null(m);
    assert_string_equal(m->name, "a");
    m = nb_keys_match(&k, "other");
    assert_non_null(m);
    assert_string_equal(m->name, "b");
    assert_null(nb_keys_match(&k, "tesT"));
    assert_null(nb_keys_match(&k, ""));
    /* the hash itself is not a key */
    assert_null(nb_keys_match(&k, H_TEST));
    assert_non_null(nb_keys_find(&k, "b"));
    assert_null(nb_keys_find(&k, "c"));
    nb_keys_free(&k);
}

static void test_bad_lines_are_refused_with_their_number(void **state)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"a user\n", "line 1: expected"},
        {"\n\na guest " H_TEST "\n", "line 3: role"},
        {"a user 1234\n", "line 1: the hash"},
        {"a user " H_TEST "0\n", "line 1: the hash"},
        {"a user 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a0g\n",
         "line 1: the hash"},
        {"default admin " H_TEST "\n", "line 1: the name \"default\""},
        {"-a user " H_TEST "\n", "line 1: \"-a\" is not a key name"},
        {"a/b user " H_TEST "\n", "line 1: \"a/b\" is not a key name"},
        {"abcdefghijklmnopqrstuvwxyz0123456 user " H_TEST "\n", "line 1: \"abcdefghij"},
        {"a user " H_TEST "\na admin " H_OTHER "\n", "line 2: a second key named \"a\""},
        {"a user " H_TEST " max_sandboxes=-1\n", "line 1: bad value \"-1\" for max_sandboxes"},
        {"a user " H_TEST " max_memory=lots\n", "line 1: bad value"},
        {"a user " H_TEST " max_cpus=1.2.3\n", "line 1: bad value"},
        {"a user " H_TEST " max_cpus=.5\n", "line 1: bad value"},
        {"a user " H_TEST " rate=10\n", "line 1: bad value"},
        {"a user " H_TEST " rate=0r/s\n", "line 1: bad value"},
        {"a user " H_TEST " max_disk=1\n", "line 1: unknown quota \"max_disk\""},
        {"a user " H_TEST " max_ports\n", "line 1: \"max_ports\" is not quota=value"},
    };
    char err[256];
    struct nb_keys k;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (parse(bad[i].text, &k, err, sizeof(err)) != -1 || strstr(err, bad[i].want) == NULL)
            fail_msg("case %zu: %s -> \"%s\", want \"%s\"", i, bad[i].text, err, bad[i].want);
        assert_int_equal(k.n, 0);
        assert_null(k.v);
    }
    /* a NUL inside a line */
    assert_int_equal(nb_keys_parse("a user\0x", 8, &k, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "NUL"));
}

static void test_save_writes_0600_and_reads_back(void **state)
{
    char dir[] = "/tmp/nb-test-keys-XXXXXX", path[64], err[256], line[512];
    struct nb_keys k, back;
    struct stat st;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/keys", dir);
    /* a missing file is no keys */
    assert_int_equal(nb_keys_load(path, &k, err, sizeof(err)), 0);
    assert_int_equal(k.n, 0);
    assert_int_equal(parse("a user " H_TEST " max_memory=1536m max_cpus=0.25 rate=5r/m\n"
                           "b admin " H_OTHER "\n",
                           &k, err, sizeof(err)),
                     0);
    assert_int_equal(nb_keys_save(path, &k, err, sizeof(err)), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(nb_keys_load(path, &back, err, sizeof(err)), 0);
    assert_int_equal(back.n, 2);
    assert_memory_equal(back.v[0].hash, k.v[0].hash, NB_KEY_HASH_LEN);
    assert_true(back.v[0].max_memory == 1536ull << 20);
    assert_true(back.v[0].max_nano_cpus == 250000000ull);
    assert_string_equal(back.v[0].rate, "5r/m");
    nb_key_format(&back.v[0], line, sizeof(line));
    assert_string_equal(line, "a user " H_TEST " max_memory=1536m max_cpus=0.25 rate=5r/m");
    nb_keys_free(&back);
    /* others may read it: refused, and the message says what to do */
    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(nb_keys_load(path, &back, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "chmod 600"));
    nb_keys_free(&k);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_with_quotas_parse),
        cmocka_unit_test(test_the_key_is_matched_by_its_hash),
        cmocka_unit_test(test_bad_lines_are_refused_with_their_number),
        cmocka_unit_test(test_save_writes_0600_and_reads_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

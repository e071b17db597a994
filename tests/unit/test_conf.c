/*
 * test_conf.c - the config reader: defaults, every value type, and errors
 * that name the file, line and key.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"

static char path[64];

static void write_conf(const char *text)
{
    int fd;
    snprintf(path, sizeof(path), "/tmp/nb-test-conf-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int load(const char *text, struct nb_conf *c, char *err, size_t errlen)
{
    int rc;
    nb_conf_defaults(c);
    write_conf(text);
    rc = nb_conf_load(c, path, err, errlen);
    unlink(path);
    return rc;
}

static void test_defaults_match_the_design(void **state)
{
    struct nb_conf c;
    (void)state;
    nb_conf_defaults(&c);
    assert_int_equal(c.memory, 256ULL << 20);
    assert_int_equal(c.nano_cpus, 500000000ULL);
    assert_int_equal(c.default_ttl, 1800);
    assert_int_equal(c.exec_timeout, 30);
    assert_int_equal(c.max_output, 1 << 20);
    assert_int_equal(c.allow_bridge, 0);
    assert_string_equal(c.images[0], "nanobox:latest");
    assert_string_equal(c.listen, "/run/nanobox/fcgi.sock");
    assert_string_equal(c.state_file, "/var/lib/nanobox/state");
}

static void test_values_of_every_type_are_read(void **state)
{
    struct nb_conf c;
    char err[256];
    (void)state;
    assert_int_equal(load("# comment\n"
                          "instance = ci   # trailing comment\n"
                          "memory = 512m\n"
                          "cpus = 1.25\n"
                          "pids = 64\n"
                          "socket_mode = 0640\n"
                          "allow_bridge = yes\n"
                          "images = nanobox:latest, busybox:latest\n"
                          "max_output = 64k\n"
                          "\n",
                          &c, err, sizeof(err)),
                     0);
    assert_string_equal(c.instance, "ci");
    assert_int_equal(c.memory, 512ULL << 20);
    assert_int_equal(c.nano_cpus, 1250000000ULL);
    assert_int_equal(c.pids, 64);
    assert_int_equal(c.socket_mode, 0640);
    assert_int_equal(c.allow_bridge, 1);
    assert_int_equal(c.n_images, 2);
    assert_string_equal(c.images[1], "busybox:latest");
    assert_true(nb_conf_image_allowed(&c, "busybox:latest"));
    assert_false(nb_conf_image_allowed(&c, "ubuntu:latest"));
    assert_int_equal(c.max_output, 64 * 1024);
}

static void test_unknown_key_names_file_and_line(void **state)
{
    struct nb_conf c;
    char err[512];
    (void)state;
    assert_int_equal(load("memory = 1g\nmemroy = 1g\n", &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, ":2:"));
    assert_non_null(strstr(err, "memroy"));
}

static void test_bad_values_are_refused(void **state)
{
    struct nb_conf c;
    char err[512];
    (void)state;
    assert_int_equal(load("memory = lots\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("cpus = -1\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("pids = 12x\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("allow_bridge = maybe\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("no equals sign\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("default_ttl = 100\nmax_ttl = 10\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("workers_min = 8\nworkers_max = 2\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("memory = 1m\n", &c, err, sizeof(err)), -1);
}

static void test_sandbox_uids_are_a_range_above_login_uids(void **state)
{
    struct nb_conf c;
    char err[512];
    (void)state;
    nb_conf_defaults(&c);
    assert_int_equal(c.sandbox_uid_base, 200000);
    assert_string_equal(c.sandbox_user_name, "sandbox");
    assert_int_equal(c.sandbox_ptys, 8);
    assert_int_equal(c.sandbox_nofile, 4096);
    assert_int_equal(load("sandbox_uid_base = 0\nsandbox_user = 1001:1001\n", &c, err, sizeof(err)),
                     0);
    assert_int_equal(load("sandbox_uid_base = 300000\nmax_sandboxes = 10\n", &c, err, sizeof(err)),
                     0);
    /* where login and system users live */
    assert_int_equal(load("sandbox_uid_base = 1000\n", &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "sandbox_uid_base"));
    /* no room for a uid per slot */
    assert_int_equal(
        load("sandbox_uid_base = 3999999990\nmax_sandboxes = 20\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("sandbox_ptys = 0\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("sandbox_nofile = 10\n", &c, err, sizeof(err)), -1);
    /* it becomes a line of /etc/passwd */
    assert_int_equal(load("sandbox_user_name = a:b\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("sandbox_user_name = \n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("sandbox_user_name = dev-1\n", &c, err, sizeof(err)), 0);
}

static void test_sizes_parse_with_suffixes_and_refuse_overflow(void **state)
{
    uint64_t v;
    (void)state;
    assert_int_equal(nb_parse_size("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(nb_parse_size("2k", &v), 0);
    assert_int_equal(v, 2048);
    assert_int_equal(nb_parse_size("1G", &v), 0);
    assert_int_equal(v, 1ULL << 30);
    assert_int_equal(nb_parse_size("128mb", &v), 0);
    assert_int_equal(v, 128ULL << 20);
    assert_int_equal(nb_parse_size("99999999999999999999", &v), -1);
    assert_int_equal(nb_parse_size("99999999999g", &v), -1);
    assert_int_equal(nb_parse_size("-5", &v), -1);
    assert_int_equal(nb_parse_size("", &v), -1);
}

static void test_missing_file_is_reported(void **state)
{
    struct nb_conf c;
    char err[512];
    (void)state;
    nb_conf_defaults(&c);
    assert_int_equal(nb_conf_load(&c, "/nonexistent/nanobox.conf", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/nonexistent/nanobox.conf"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_match_the_design),
        cmocka_unit_test(test_values_of_every_type_are_read),
        cmocka_unit_test(test_unknown_key_names_file_and_line),
        cmocka_unit_test(test_bad_values_are_refused),
        cmocka_unit_test(test_sandbox_uids_are_a_range_above_login_uids),
        cmocka_unit_test(test_sizes_parse_with_suffixes_and_refuse_overflow),
        cmocka_unit_test(test_missing_file_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

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
#include "netrule.h"

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
    assert_string_equal(c.images[1], "nanobox-python:latest");
    assert_int_equal(c.n_images, 2);
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
    assert_int_equal(load("listen_backlog = 8\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("listen_backlog = 70000\n", &c, err, sizeof(err)), -1);
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

static void test_e2b_home_is_under_home_the_workspace_or_empty(void **state)
{
    struct nb_conf c;
    char err[512];
    (void)state;
    nb_conf_defaults(&c);
    assert_string_equal(c.e2b_home, "/home/user");
    assert_int_equal(load("e2b_home = /home/dev_1\n", &c, err, sizeof(err)), 0);
    assert_int_equal(load("e2b_home = \n", &c, err, sizeof(err)), 0);
    assert_int_equal(load("workspace = /home/user\ne2b_home = /home/user\n", &c, err, sizeof(err)),
                     0);
    assert_int_equal(load("workspace = /srv/w\ne2b_home = /srv/w\n", &c, err, sizeof(err)), 0);
    /* /home is nanobox's: one name in it, nothing else */
    assert_int_equal(load("e2b_home = /opt/user\n", &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "e2b_home"));
    assert_int_equal(load("e2b_home = /home/\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("e2b_home = /home/a/b\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("e2b_home = /home/..\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("e2b_home = /home\n", &c, err, sizeof(err)), -1);
    /* the read-only /home would hide a workspace under it */
    assert_int_equal(load("workspace = /home/w\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("workspace = /home/w\ne2b_home = \n", &c, err, sizeof(err)), 0);
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

static void test_egress_rules_parse_one_way(void **state)
{
    struct nb_netrule r;
    char err[200], text[NB_NETRULE_TEXT];
    (void)state;
    assert_int_equal(nb_netrule_parse("10.1.2.0/24", &r, err, sizeof(err)), 0);
    assert_int_equal(r.addr, 0x0a010200u);
    assert_int_equal(r.prefix, 24);
    assert_int_equal(r.port, 0);
    assert_int_equal(nb_netrule_parse("192.0.2.7:443", &r, err, sizeof(err)), 0);
    assert_int_equal(r.prefix, 32);
    assert_int_equal(r.port, 443);
    nb_netrule_format(&r, text, sizeof(text));
    assert_string_equal(text, "192.0.2.7/32:443");
    assert_int_equal(nb_netrule_parse("0.0.0.0/0", &r, err, sizeof(err)), 0);
    assert_int_equal(r.prefix, 0);

    assert_int_equal(nb_netrule_parse("example.com", &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "domain names are not supported"));
    assert_int_equal(nb_netrule_parse("2001:db8::1", &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "IPv6"));
    assert_int_equal(nb_netrule_parse("10.1.2.3/24", &r, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "host bits"));
    const char *bad[] = {"",           "1.2.3",     "1.2.3.4.5",     "256.1.1.1",     "01.2.3.4",
                         "1.2.3.4/33", "1.2.3.4:0", "1.2.3.4:65536", "1.2.3.4:80/32", "1.2.3.4/",
                         "1.2.3.4:",   " 1.2.3.4",  "1.2.3.4/8x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(nb_netrule_parse(bad[i], &r, err, sizeof(err)), -1);
}

static void test_egress_rules_nest_and_meet(void **state)
{
    struct nb_netrule all, ten, host, host443, host80;
    char err[200];
    (void)state;
    assert_int_equal(nb_netrule_parse("0.0.0.0/0", &all, err, sizeof(err)), 0);
    assert_int_equal(nb_netrule_parse("10.0.0.0/8", &ten, err, sizeof(err)), 0);
    assert_int_equal(nb_netrule_parse("10.9.8.7", &host, err, sizeof(err)), 0);
    assert_int_equal(nb_netrule_parse("10.9.8.7:443", &host443, err, sizeof(err)), 0);
    assert_int_equal(nb_netrule_parse("10.9.8.7:80", &host80, err, sizeof(err)), 0);
    assert_true(nb_netrule_within(&ten, &all));
    assert_true(nb_netrule_within(&host, &ten));
    assert_true(nb_netrule_within(&host443, &host));
    assert_false(nb_netrule_within(&host, &host443)); /* every port is more than one */
    assert_false(nb_netrule_within(&ten, &host));
    assert_true(nb_netrule_overlaps(&all, &host443));
    assert_true(nb_netrule_overlaps(&host, &host80));
    assert_false(nb_netrule_overlaps(&host443, &host80));
}

static void test_bridge_keys_are_checked(void **state)
{
    struct nb_conf c;
    char err[256];
    struct nb_netrules l;
    (void)state;
    nb_conf_defaults(&c);
    assert_string_equal(c.bridge_network, "nanobox");
    assert_string_equal(c.bridge_interface, "nanobox0");
    assert_int_equal(nb_netrules_parse_list(c.egress_deny, &l, err, sizeof(err)), 0);
    assert_int_equal(l.n, 7);
    assert_int_equal(load("egress_allow = 10.0.0.2:53, 10.0.0.3:53\n", &c, err, sizeof(err)), 0);
    assert_int_equal(load("egress_deny = example.com\n", &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "egress_deny"));
    assert_int_equal(load("bridge_subnet = 10.1.0.0/29\n", &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "max_sandboxes"));
    assert_int_equal(load("bridge_subnet = 10.1.0.0/29\nmax_sandboxes = 4\n", &c, err, sizeof(err)),
                     0);
    assert_int_equal(load("bridge_interface = bad name\n", &c, err, sizeof(err)), -1);
    assert_int_equal(load("bridge_interface = abcdefghijklmnop\n", &c, err, sizeof(err)), -1);
}

static void test_snapshot_and_template_pool_keys(void **state)
{
    struct nb_conf c;
    struct nb_warm_template wt[NB_WARM_TEMPLATES_MAX];
    char err[256];
    (void)state;
    nb_conf_defaults(&c);
    assert_int_equal(c.snapshot_max, 1024ULL * 1024 * 1024);
    assert_string_equal(c.warm_pool_template, "");
    assert_int_equal(nb_conf_warm_templates("", wt, err, sizeof(err)), 0);
    assert_int_equal(
        load("snapshot_max = 5m\nwarm_pool_template = tools:2, snap.1_x-y:0 nanobox-python:3\n", &c,
             err, sizeof(err)),
        0);
    assert_int_equal(c.snapshot_max, 5ULL * 1024 * 1024);
    assert_int_equal(nb_conf_warm_templates(c.warm_pool_template, wt, err, sizeof(err)), 3);
    assert_string_equal(wt[0].name, "tools");
    assert_int_equal(wt[0].want, 2);
    assert_string_equal(wt[1].name, "snap.1_x-y");
    assert_int_equal(wt[1].want, 0);
    assert_string_equal(wt[2].name, "nanobox-python");
    assert_int_equal(wt[2].want, 3);
    /* each refusal names the key */
    static const char *const bad[] = {
        "warm_pool_template = tools\n",
        "warm_pool_template = tools:\n",
        "warm_pool_template = :2\n",
        "warm_pool_template = Tools:2\n",
        "warm_pool_template = -x:2\n",
        "warm_pool_template = tools:257\n",
        "warm_pool_template = tools:2x\n",
        "warm_pool_template = a/b:1\n",
        "warm_pool_template = a:1,b:1,c:1,d:1,e:1,f:1,g:1,h:1,i:1\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(load(bad[i], &c, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "warm_pool_template"));
    }
}

static void test_adaptive_warm_pool_keys(void **state)
{
    struct nb_conf c;
    char err[256];
    (void)state;
    nb_conf_defaults(&c);
    /* today's floors, a few more at most after a burst */
    assert_int_equal(c.warm_pool, 2);
    assert_int_equal(c.warm_pool_max, 8);
    assert_int_equal(c.warm_pool_code_max, 4);
    assert_int_equal(c.warm_pool_e2b_max, 8);
    assert_int_equal(c.warm_pool_idle, 60);
    assert_int_equal(c.warm_pool_memory, 0);
    assert_int_equal(c.warm_pool_reserve, 1024ULL * 1024 * 1024);
    assert_int_equal(c.warm_pool_parallel, 2);
    assert_int_equal(load("warm_pool_max = 16\nwarm_pool_code_max = 0\nwarm_pool_e2b_max = 3\n"
                          "warm_pool_idle = 1\nwarm_pool_memory = 1g\nwarm_pool_reserve = 0\n",
                          &c, err, sizeof(err)),
                     0);
    assert_int_equal(c.warm_pool_max, 16);
    assert_int_equal(c.warm_pool_code_max, 0);
    assert_int_equal(c.warm_pool_e2b_max, 3);
    assert_int_equal(c.warm_pool_idle, 1);
    assert_int_equal(c.warm_pool_memory, 1024ULL * 1024 * 1024);
    assert_int_equal(c.warm_pool_reserve, 0);
    /* each refusal names the key */
    static const struct {
        const char *text, *key;
    } bad[] = {
        {"warm_pool_max = 257\n", "warm_pool_max"},
        {"warm_pool_max = -1\n", "warm_pool_max"},
        {"warm_pool_code_max = lots\n", "warm_pool_code_max"},
        {"warm_pool_e2b_max = 1000\n", "warm_pool_e2b_max"},
        {"warm_pool_idle = 0\n", "warm_pool_idle"},
        {"warm_pool_idle = 100000\n", "warm_pool_idle"},
        {"warm_pool_memory = 1x\n", "warm_pool_memory"},
        /* below one sandbox (memory, 256m by default) */
        {"warm_pool_memory = 100m\n", "warm_pool_memory"},
        {"warm_pool_reserve = many\n", "warm_pool_reserve"},
        {"warm_pool_parallel = 0\n", "warm_pool_parallel"},
        {"warm_pool_parallel = 17\n", "warm_pool_parallel"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(load(bad[i].text, &c, err, sizeof(err)), -1);
        assert_non_null(strstr(err, bad[i].key));
    }
    /* a budget of one sandbox is one */
    assert_int_equal(load("memory = 64m\nwarm_pool_memory = 64m\n", &c, err, sizeof(err)), 0);
}

static void test_root_disk_keys(void **state)
{
    struct nb_conf c;
    char err[256];
    (void)state;
    nb_conf_defaults(&c);
    assert_int_equal(c.root_disk_max, 2048ULL * 1024 * 1024);
    assert_int_equal(c.root_disk_check, 10);
    assert_int_equal(c.root_disk_inodes, 131072);
    assert_int_equal(load("root_disk_inodes = 4096\n", &c, err, sizeof(err)), 0);
    assert_int_equal(c.root_disk_inodes, 4096);
    assert_int_equal(load("root_disk_max = 20m\nroot_disk_check = 1\n", &c, err, sizeof(err)), 0);
    assert_int_equal(c.root_disk_max, 20ULL * 1024 * 1024);
    assert_int_equal(c.root_disk_check, 1);
    assert_int_equal(load("root_disk_max = 0\n", &c, err, sizeof(err)), 0);
    assert_int_equal(c.root_disk_max, 0);
    static const char *const bad[] = {
        "root_disk_max = lots\n", "root_disk_max = -1\n",     "root_disk_max = 2p\n",
        "root_disk_check = 0\n",  "root_disk_check = 3601\n", "root_disk_check = 1s\n",
        "root_disk_max = 15m\n",  "root_disk_inodes = 255\n", "root_disk_inodes = lots\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        nb_conf_defaults(&c);
        assert_int_equal(load(bad[i], &c, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "root_disk_"));
    }
}

/* a cluster node: node_name, node_url and etcd_endpoints go together (cluster.h) */
static void test_cluster_keys(void **state)
{
    struct nb_conf c;
    char err[256];
    (void)state;
    nb_conf_defaults(&c);
    assert_string_equal(c.node_name, "");
    assert_string_equal(c.etcd_endpoints, "");
    assert_string_equal(c.etcd_prefix, "/nanobox/");
    assert_int_equal(c.node_lease_ttl, 5);
    assert_int_equal(c.volume_orphan_after, 86400);
    assert_int_equal(load("volume_orphan_after = 0\n", &c, err, sizeof(err)), 0);
    assert_int_equal(c.volume_orphan_after, 0); /* never */
    assert_int_equal(load("volume_orphan_after = 600\n", &c, err, sizeof(err)), 0);
    assert_int_equal(c.volume_orphan_after, 600);
    assert_int_equal(load("volume_orphan_after = 1d\n", &c, err, sizeof(err)), -1); /* seconds */
    assert_non_null(strstr(err, "volume_orphan_after"));
    assert_int_equal(load("volume_orphan_after = 315360001\n", &c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "volume_orphan_after"));
    assert_int_equal(load("node_name = n1\nnode_url = http://10.0.0.1:8080\n"
                          "etcd_endpoints = http://127.0.0.1:2379, https://e2:2379/\n"
                          "node_lease_ttl = 3\nnode_drain = yes\n",
                          &c, err, sizeof(err)),
                     0);
    assert_string_equal(c.node_name, "n1");
    assert_int_equal(c.node_lease_ttl, 3);
    assert_int_equal(c.node_drain, 1);
    {
        char eps[NB_ETCD_ENDPOINTS_MAX][NB_ETCD_URL_MAX];
        unsigned n = 0;
        assert_int_equal(nb_conf_endpoints(c.etcd_endpoints, eps, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 2);
        assert_string_equal(eps[0], "http://127.0.0.1:2379");
        assert_string_equal(eps[1], "https://e2:2379"); /* the trailing / dropped */
    }
    assert_int_equal(load("node_name = n1\nnode_url = http://x\netcd_endpoints = http://e:1\n"
                          "cluster_secret = 0123456789abcdef\n",
                          &c, err, sizeof(err)),
                     0);
    assert_string_equal(c.cluster_secret, "0123456789abcdef");
    assert_int_equal(load("etcd_cacert = /etc/nanobox/ca.pem\netcd_cert = /etc/nanobox/n.pem\n"
                          "etcd_key = /etc/nanobox/n.key\n",
                          &c, err, sizeof(err)),
                     0);
    assert_string_equal(c.etcd_key, "/etc/nanobox/n.key");
    /* a name alone tags the ids of a machine that may join later */
    assert_int_equal(load("node_name = solo\n", &c, err, sizeof(err)), 0);
    static const char *const bad[] = {
        "node_name = Upper\n",
        "node_name = -lead\n",
        "node_name = trail-\n",
        "node_name = has.dot\n",
        "node_name = abcdefghijklmnopqrstuvwxyz0123456\n", /* 33 */
        "etcd_endpoints = http://127.0.0.1:2379\n",        /* no name, no url */
        "node_name = n1\netcd_endpoints = http://127.0.0.1:2379\n",
        "node_name = n1\nnode_url = ftp://x\netcd_endpoints = http://127.0.0.1:2379\n",
        "node_name = n1\nnode_url = http://x\netcd_endpoints = 127.0.0.1:2379\n",
        "node_name = n1\nnode_url = http://x\netcd_endpoints = ,\n",
        "node_name = n1\nnode_url = http://x\netcd_endpoints = http://1,http://2,http://3,"
        "http://4,http://5,http://6,http://7,http://8,http://9\n",
        "etcd_prefix = nanobox\n",
        "etcd_prefix = /nanobox\n",
        "node_lease_ttl = 1\n",
        "cluster_secret = short\n",
        "cluster_secret = 0123456789abcdef0123\n", /* no etcd_endpoints */
        "node_name = n1\nnode_url = http://x\netcd_endpoints = http://e:1\n"
        "cluster_secret = 15-characters!!\n",
        "etcd_cert = /etc/nanobox/etcd.pem\n", /* no key */
        "etcd_key = /etc/nanobox/etcd.key\n",  /* no certificate */
        "etcd_cacert = ca.pem\n",              /* not absolute */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        nb_conf_defaults(&c);
        assert_int_equal(load(bad[i], &c, err, sizeof(err)), -1);
        assert_true(strstr(err, "node_") != NULL || strstr(err, "etcd_") != NULL ||
                    strstr(err, "cluster_secret") != NULL);
    }
}

/* max_sandboxes = auto: by memory and pids, whichever gives fewer, within bounds */
static void test_max_sandboxes_auto(void **state)
{
    struct nb_conf c;
    char err[256];
    (void)state;

    assert_int_equal(nb_conf_sandboxes_for(4ULL << 30, 32768), 256);
    assert_int_equal(nb_conf_sandboxes_for(24ULL << 30, 32768), 1024);   /* pids */
    assert_int_equal(nb_conf_sandboxes_for(24ULL << 30, 4194304), 1536); /* memory */
    assert_int_equal(nb_conf_sandboxes_for(512ULL << 20, 4194304), 64);  /* the floor */
    assert_int_equal(nb_conf_sandboxes_for(1ULL << 40, 4194304), 4096);  /* the ceiling */
    nb_conf_defaults(&c);
    assert_int_equal(c.max_sandboxes, nb_conf_auto_sandboxes());
    assert_int_equal(load("max_sandboxes = 10\nmax_sandboxes = auto\n", &c, err, sizeof(err)), 0);
    assert_int_equal(c.max_sandboxes, nb_conf_auto_sandboxes());
    assert_int_equal(load("max_sandboxes = 300\n", &c, err, sizeof(err)), 0);
    assert_int_equal(c.max_sandboxes, 300);
    assert_int_equal(load("max_sandboxes = automatic\n", &c, err, sizeof(err)), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_match_the_design),
        cmocka_unit_test(test_values_of_every_type_are_read),
        cmocka_unit_test(test_unknown_key_names_file_and_line),
        cmocka_unit_test(test_bad_values_are_refused),
        cmocka_unit_test(test_sandbox_uids_are_a_range_above_login_uids),
        cmocka_unit_test(test_e2b_home_is_under_home_the_workspace_or_empty),
        cmocka_unit_test(test_sizes_parse_with_suffixes_and_refuse_overflow),
        cmocka_unit_test(test_missing_file_is_reported),
        cmocka_unit_test(test_egress_rules_parse_one_way),
        cmocka_unit_test(test_egress_rules_nest_and_meet),
        cmocka_unit_test(test_bridge_keys_are_checked),
        cmocka_unit_test(test_snapshot_and_template_pool_keys),
        cmocka_unit_test(test_adaptive_warm_pool_keys),
        cmocka_unit_test(test_root_disk_keys),
        cmocka_unit_test(test_max_sandboxes_auto),
        cmocka_unit_test(test_cluster_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

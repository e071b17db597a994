/*
 * test_cluster.c - what nodes of a cluster agree on (cluster.h): node tags,
 * sandbox ids that carry them, the node record's JSON; and the etcd client
 * (etcd.h) when no endpoint answers. The client against a real etcd is
 * tests/integration/test_cluster.py's.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "cluster.h"
#include "etcd.h"
#include "frontmap.h"
#include "table.h"

/* printf 'nanobox-node:node-a' | sha256sum: the format is pinned, not just
 * self-consistent */
#define NODE_A_TAG "c0633e6a8423"

static void test_tag_is_the_first_48_bits_of_sha256(void **state)
{
    char tag[NB_NODE_TAG_LEN + 1];
    (void)state;
    nb_node_tag("node-a", tag);
    assert_int_equal(strlen(tag), 12);
    assert_string_equal(tag, NODE_A_TAG);
    nb_node_tag("node-b", tag);
    assert_string_not_equal(tag, NODE_A_TAG);
}

static void test_ids_carry_the_tag_or_are_plain_v4(void **state)
{
    char id[37], id2[37], tag[NB_NODE_TAG_LEN + 1];
    (void)state;
    nb_cluster_new_id(NODE_A_TAG, id);
    assert_int_equal(strlen(id), 36);
    assert_int_equal(id[14], '8');
    assert_true(strchr("89ab", id[19]) != NULL);
    assert_string_equal(id + 24, NODE_A_TAG);
    assert_int_equal(nb_cluster_id_tag(id, tag), 1);
    assert_string_equal(tag, NODE_A_TAG);
    nb_cluster_new_id(NODE_A_TAG, id2);
    assert_string_not_equal(id, id2); /* random but for the tag */
    nb_cluster_new_id("", id);
    assert_int_equal(id[14], '4');
    assert_int_equal(nb_cluster_id_tag(id, tag), 0);
    nb_cluster_new_id(NULL, id);
    assert_int_equal(id[14], '4');
    assert_int_equal(nb_cluster_id_tag("not-an-id", tag), 0);
    assert_int_equal(nb_cluster_id_tag("00000000-0000-8000-8000-00000000000g", tag), 0);
}

static void test_node_record_round_trips(void **state)
{
    struct nb_node_info n, back;
    char *json;
    (void)state;
    memset(&n, 0, sizeof(n));
    snprintf(n.name, sizeof(n.name), "node-a");
    snprintf(n.tag, sizeof(n.tag), "%s", NODE_A_TAG);
    snprintf(n.url, sizeof(n.url), "http://10.0.0.1:8080");
    snprintf(n.version, sizeof(n.version), "1.2.3");
    n.slots = 1024;
    n.free = 1000;
    n.running = 24;
    n.memory_available = 17ULL << 30;
    n.drain = 1;
    n.since = 1700000000;
    n.heartbeat = 1700000123;
    n.n_templates = 2;
    snprintf(n.templates[0], sizeof(n.templates[0]), "nanobox");
    snprintf(n.templates[1], sizeof(n.templates[1]), "alice/my-tpl");
    json = nb_node_info_json(&n);
    assert_int_equal(nb_node_info_parse(json, strlen(json), &back), 0);
    free(json);
    assert_string_equal(back.name, "node-a");
    assert_string_equal(back.url, n.url);
    assert_int_equal(back.free, 1000);
    assert_int_equal(back.memory_available, 17ULL << 30);
    assert_int_equal(back.drain, 1);
    assert_int_equal(back.heartbeat, 1700000123);
    assert_int_equal(back.n_templates, 2);
    assert_string_equal(back.templates[1], "alice/my-tpl");
    /* what cannot be a record is refused */
    assert_int_equal(nb_node_info_parse("{", 1, &back), -1);
    assert_int_equal(nb_node_info_parse("[]", 2, &back), -1);
    assert_int_equal(nb_node_info_parse("{\"name\":\"Bad Name\"}", 19, &back), -1);
}

/* A registry row carries what a list shows of a sandbox, and the same
 * slot always gives the same text (the index compares hashes of it). */
static void test_registry_row_round_trips(void **state)
{
    struct nb_slot s, back;
    char node[NB_REG_NODE_MAX], key[NB_REG_KEY_MAX];
    char *row, *again;
    (void)state;
    memset(&s, 0, sizeof(s));
    snprintf(s.id, sizeof(s.id), "0a1b2c3d-0000-8000-8000-%s", NODE_A_TAG);
    snprintf(s.owner, sizeof(s.owner), "alice");
    snprintf(s.image, sizeof(s.image), "nanobox:latest");
    snprintf(s.metadata, sizeof(s.metadata), "{\"a\":\"b\\\"c\"}");
    s.state = NB_SLOT_PAUSED;
    s.created = 1700000000;
    s.expires = 1700000300;
    s.memory = 256ULL << 20;
    s.nano_cpus = 500000000;
    s.pids = 256;
    s.network_bridge = 1;
    s.lifecycle = NB_LIFE_AUTO_RESUME;
    s.state_since = 1700000100;
    s.ttl_left = 200;
    s.pause_expires = 1700086400;
    row = nb_registry_row(&s, "node-a");
    again = nb_registry_row(&s, "node-a");
    assert_string_equal(row, again);
    assert_true(nb_registry_hash(row, strlen(row)) == nb_registry_hash(again, strlen(again)));
    assert_int_equal(nb_registry_row_parse(row, strlen(row), &back, node), 0);
    assert_string_equal(node, "node-a");
    assert_string_equal(back.id, s.id);
    assert_string_equal(back.owner, "alice");
    assert_string_equal(back.metadata, s.metadata);
    assert_int_equal(back.state, NB_SLOT_PAUSED);
    assert_true(back.created == s.created && back.expires == s.expires);
    assert_true(back.memory == s.memory && back.nano_cpus == s.nano_cpus);
    assert_true(back.ttl_left == 200 && back.pause_expires == s.pause_expires);
    assert_true(back.state_since == s.state_since && back.lifecycle == s.lifecycle);
    s.expires++; /* a change changes the text and its hash */
    free(again);
    again = nb_registry_row(&s, "node-a");
    assert_string_not_equal(row, again);
    assert_false(nb_registry_hash(row, strlen(row)) == nb_registry_hash(again, strlen(again)));
    /* what is not a row is refused */
    assert_int_equal(nb_registry_row_parse("{\"id\":\"x\"}", 10, &back, node), -1);
    assert_int_equal(nb_registry_row_parse("[1]", 3, &back, node), -1);
    assert_int_equal(nb_registry_row_parse("{", 1, &back, node), -1);
    free(row);
    free(again);
    /* the keys: an owner, or "-" for none */
    nb_registry_row_key("/nb/", "alice", s.id, key, sizeof(key));
    assert_int_equal(strncmp(key, "/nb/sandboxes/alice/", 20), 0);
    nb_registry_row_key("/nb/", "", s.id, key, sizeof(key));
    assert_int_equal(strncmp(key, "/nb/sandboxes/-/", 16), 0);
    nb_registry_rows_key("/nb/", NULL, key, sizeof(key));
    assert_string_equal(key, "/nb/sandboxes/");
    nb_registry_mark_key("/nb/", NODE_A_TAG, s.id, key, sizeof(key));
    assert_int_equal(strncmp(key, "/nb/onnode/" NODE_A_TAG "/", 24), 0);
    nb_registry_guard_key("/nb/", "alice", key, sizeof(key));
    assert_string_equal(key, "/nb/owners/alice");
}

static void test_template_entry_round_trips(void **state)
{
    struct nb_tpl_meta m = {1767225600, "node-a", 0, 1, 0}, back;
    char key[NB_REG_KEY_MAX], *json;
    (void)state;
    json = nb_tpl_meta_json(&m);
    assert_int_equal(nb_tpl_meta_parse(json, strlen(json), &back), 0);
    assert_true(back.at == m.at && !back.removed && back.recipe);
    assert_string_equal(back.node, "node-a");
    free(json);
    m.removed = 1;
    m.recipe = 0;
    json = nb_tpl_meta_json(&m);
    assert_int_equal(nb_tpl_meta_parse(json, strlen(json), &back), 0);
    assert_true(back.removed && !back.recipe && !back.snapshot);
    free(json);
    m.removed = 0;
    m.snapshot = 1; /* a snapshot's: one node's, no recipe */
    json = nb_tpl_meta_json(&m);
    assert_non_null(strstr(json, "\"snapshot\":true"));
    assert_int_equal(nb_tpl_meta_parse(json, strlen(json), &back), 0);
    assert_true(back.snapshot && !back.recipe && !back.removed);
    free(json);
    assert_int_equal(nb_tpl_meta_parse("[1]", 3, &back), -1);
    assert_int_equal(nb_tpl_meta_parse("{\"at\":", 6, &back), -1);
    nb_cluster_tpl_key("/nb/", "templates", "alice", "web", key, sizeof(key));
    assert_string_equal(key, "/nb/templates/alice/web");
    nb_cluster_tpl_key("/nb/", "recipes", "alice", "web", key, sizeof(key));
    assert_string_equal(key, "/nb/recipes/alice/web");
    nb_cluster_tpl_key("/nb/", "templates", "alice", NULL, key, sizeof(key));
    assert_string_equal(key, "/nb/templates/alice/");
    nb_cluster_tpl_key("/nb/", "templates", NULL, NULL, key, sizeof(key));
    assert_string_equal(key, "/nb/templates/");
}

static void test_keys(void **state)
{
    char k[128];
    (void)state;
    nb_cluster_node_key("/nanobox/", "node-a", k, sizeof(k));
    assert_string_equal(k, "/nanobox/nodes/node-a");
    nb_cluster_tag_key("/nanobox/", NODE_A_TAG, k, sizeof(k));
    assert_string_equal(k, "/nanobox/tags/" NODE_A_TAG);
}

/* no endpoint answers: every call fails at once, says where, changes nothing */
static void test_etcd_without_an_answer(void **state)
{
    struct nb_etcd e;
    int64_t lease = 0;
    (void)state;
    assert_int_equal(nb_etcd_init(&e, "127.0.0.1:1", 200, 4096), -1);
    assert_non_null(strstr(e.err, "etcd_endpoints"));
    assert_int_equal(nb_etcd_init(&e, "http://127.0.0.1:1,http://127.0.0.1:2", 200, 4096), 0);
    assert_int_equal(nb_etcd_grant(&e, 5, &lease), -1);
    assert_non_null(strstr(e.err, "127.0.0.1:"));
    assert_int_equal(nb_etcd_put(&e, "/k", "v", 1, 0), -1);
    assert_int_equal(nb_etcd_get(&e, "/k", 1, NULL, NULL), -1);
    assert_int_equal(nb_etcd_keepalive(&e, 1), -1);
    assert_int_equal(nb_etcd_create(&e, "/k", "v", 1, 0, NULL, NULL), -1);
    nb_etcd_cleanup(&e);
}

/* the front's include: an upstream per node, the takers, the map by tag */
static void test_front_map(void **state)
{
    struct nb_node_info nodes[3];
    struct nb_buf out;
    unsigned skipped;
    char hp[64];
    (void)state;
    assert_int_equal(nb_front_server("http://10.0.0.1:8080/x", hp, sizeof(hp)), 0);
    assert_string_equal(hp, "10.0.0.1:8080");
    assert_int_equal(nb_front_server("http://[::1]:80", hp, sizeof(hp)), 0);
    assert_int_equal(nb_front_server("https://a:1", hp, sizeof(hp)), -1);
    assert_int_equal(nb_front_server("http://a;b:1", hp, sizeof(hp)), -1);
    assert_int_equal(nb_front_server("http://a b", hp, sizeof(hp)), -1);
    assert_int_equal(nb_front_server("http://", hp, sizeof(hp)), -1);

    memset(nodes, 0, sizeof(nodes));
    snprintf(nodes[0].name, sizeof(nodes[0].name), "node-a");
    snprintf(nodes[0].url, sizeof(nodes[0].url), "http://10.0.0.1:8080");
    snprintf(nodes[0].tag, sizeof(nodes[0].tag), "ffffffffffff"); /* not trusted */
    snprintf(nodes[1].name, sizeof(nodes[1].name), "b");
    snprintf(nodes[1].url, sizeof(nodes[1].url), "http://10.0.0.2:8080");
    nodes[1].drain = 1;
    snprintf(nodes[2].name, sizeof(nodes[2].name), "evil");
    snprintf(nodes[2].url, sizeof(nodes[2].url), "http://x; } server { listen 1");
    nb_buf_init(&out, 1 << 16);
    nb_front_map(nodes, 3, &out, &skipped);
    assert_int_equal(skipped, 1);
    assert_non_null(strstr(out.data, "upstream nb_node_node-a {\n    server 10.0.0.1:8080"));
    assert_non_null(strstr(out.data, "upstream nb_node_b {\n    server 10.0.0.2:8080"));
    assert_null(strstr(out.data, "evil"));
    /* the drained node routes its own sandboxes but takes no new one */
    assert_non_null(strstr(
        out.data, "upstream nb_nodes {\n    server 10.0.0.1:8080 max_fails=0;\n    keepalive"));
    assert_non_null(strstr(out.data, "    " NODE_A_TAG " nb_node_node-a;\n"));
    assert_null(strstr(out.data, "ffffffffffff"));
    assert_non_null(strstr(out.data, "\"~^[0-9a-f]{12}$\" nb_gone;"));
    /* an id without a tag is looked for on every node, the drained one too */
    assert_non_null(strstr(out.data, "upstream nb_all {\n    server 10.0.0.1:8080 max_fails=0;\n"
                                     "    server 10.0.0.2:8080 max_fails=0;\n"));
    assert_non_null(strstr(out.data, "    legacy nb_legacy;\n"));
    nb_buf_free(&out);
    /* no node: nginx still starts, and the pool answers 502 */
    nb_buf_init(&out, 1 << 16);
    nb_front_map(NULL, 0, &out, &skipped);
    assert_non_null(strstr(out.data, "server 127.0.0.1:1 down;"));
    nb_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tag_is_the_first_48_bits_of_sha256),
        cmocka_unit_test(test_ids_carry_the_tag_or_are_plain_v4),
        cmocka_unit_test(test_node_record_round_trips),
        cmocka_unit_test(test_registry_row_round_trips),
        cmocka_unit_test(test_template_entry_round_trips),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_etcd_without_an_answer),
        cmocka_unit_test(test_front_map),
    };
    int rc;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}

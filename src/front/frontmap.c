/*
 * frontmap.c - see frontmap.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "frontmap.h"

int nb_front_server(const char *url, char *out, size_t outlen)
{
    const char *p, *end;
    size_t len;

    if (strncmp(url, "http://", 7) != 0)
        return -1;
    p = url + 7;
    end = p + strcspn(p, "/?#");
    len = (size_t)(end - p);
    if (len == 0 || len >= outlen)
        return -1;
    for (const char *q = p; q < end; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
              *q == '.' || *q == '-' || *q == ':' || *q == '[' || *q == ']'))
            return -1;
    memcpy(out, p, len);
    out[len] = '\0';
    return 0;
}

void nb_front_map(const struct nb_node_info *nodes, size_t n, struct nb_buf *out, unsigned *skipped)
{
    char hp[256];
    unsigned takers = 0;

    *skipped = 0;
    nb_buf_printf(out, "# Written by nanobox-front from the node records in etcd, again each time\n"
                       "# they change: do not edit (docs/CLUSTER.md, \"The front\").\n\n");
    for (size_t i = 0; i < n; i++) {
        if (nb_front_server(nodes[i].url, hp, sizeof(hp)) != 0) {
            (*skipped)++;
            continue;
        }
        nb_buf_printf(out,
                      "upstream nb_node_%s {\n    server %s max_fails=0;\n    keepalive 16;\n}\n",
                      nodes[i].name, hp);
    }
    /* the nodes that take new sandboxes (creates, lists: any node answers) */
    nb_buf_printf(out, "upstream nb_nodes {\n");
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].drain || nb_front_server(nodes[i].url, hp, sizeof(hp)) != 0)
            continue;
        nb_buf_printf(out, "    server %s max_fails=0;\n", hp);
        takers++;
    }
    if (takers == 0)
        nb_buf_printf(out, "    server 127.0.0.1:1 down; # no node takes sandboxes now\n");
    nb_buf_printf(out, "    keepalive 16;\n}\n");
    /* every node, drained too: where an id without a node tag is looked for */
    nb_buf_printf(out, "upstream nb_all {\n");
    for (size_t i = 0; i < n; i++)
        if (nb_front_server(nodes[i].url, hp, sizeof(hp)) == 0)
            nb_buf_printf(out, "    server %s max_fails=0;\n", hp);
    if (n - *skipped == 0)
        nb_buf_printf(out, "    server 127.0.0.1:1 down; # no node\n");
    nb_buf_printf(out, "    keepalive 16;\n}\n");
    nb_buf_printf(out, "map $nb_tag $nb_node {\n    default nb_nodes;\n    legacy nb_legacy;\n"
                       "    \"~^[0-9a-f]{12}$\" nb_gone;\n");
    for (size_t i = 0; i < n; i++) {
        char tag[NB_NODE_TAG_LEN + 1];
        if (nb_front_server(nodes[i].url, hp, sizeof(hp)) != 0)
            continue;
        nb_node_tag(nodes[i].name, tag); /* from the name: a record's own "tag" is not trusted */
        nb_buf_printf(out, "    %s nb_node_%s;\n", tag, nodes[i].name);
    }
    nb_buf_printf(out, "}\n");
}

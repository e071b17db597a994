/*
 * fcopy.h - whole trees for files.c: a move that crosses mounts (V on
 * EXDEV: copy the tree next to the destination, rename it into place,
 * remove the source) and a recursive delete.
 */
#ifndef INIT_FCOPY_H
#define INIT_FCOPY_H

/* Move from to to by copying (modes, mtimes, symlinks as symlinks,
 * directories recursively); 0 or an errno. The source is removed only
 * once the copy is in place; a failure before that leaves no copy. */
int init_fcopy_move(const char *from, const char *to);

/* Remove name (a directory) in parent and everything in it; 0 or an errno
 * (files.c's recursive D, and the source of a copied move). */
int init_fcopy_rm_tree(int parent, const char *name, int depth);

#endif

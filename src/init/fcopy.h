/*
 * fcopy.h - a move that crosses mounts (files.c's V on EXDEV): copy the
 * tree next to the destination, rename it into place, remove the source.
 */
#ifndef INIT_FCOPY_H
#define INIT_FCOPY_H

/* Move from to to by copying (modes, mtimes, symlinks as symlinks,
 * directories recursively); 0 or an errno. The source is removed only
 * once the copy is in place; a failure before that leaves no copy. */
int init_fcopy_move(const char *from, const char *to);

/* files.c: remove name (a directory) in parent and everything in it; 0 or an errno. */
int init_files_rm_tree(int parent, const char *name, int depth);

#endif

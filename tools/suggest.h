/* Which subcommand a mistyped word meant: "statsu" is status, and
 * "force-unlock" (Redisson's forceUnlock) is release --force. relock says
 * so instead of taking the word for a lock name. */
#ifndef RELOCK_TOOLS_SUGGEST_H
#define RELOCK_TOOLS_SUGGEST_H

/* What to write instead of word ("status", "release --force", "--help"),
 * or NULL if word is close to none of them. */
const char *suggest_subcommand(const char *word);

#endif /* RELOCK_TOOLS_SUGGEST_H */

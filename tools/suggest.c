/* Which subcommand a mistyped word meant (suggest.h): a known wrong name,
 * else the subcommand within a small edit distance. */
#include <ctype.h>
#include <stddef.h>
#include <string.h>
#include <strings.h> /* strcasecmp */

#include "suggest.h"

/* Names other tools use, which relock spells differently. */
static const struct {
  const char *word, *meant;
} known[] = {{"force-unlock", "release --force"}, {"forceunlock", "release --force"},
             {"unlock", "release --force"},       {"force-release", "release --force"},
             {"ls", "list"},                      {"help", "--help"},
             {"version", "--version"}};

/* Each subcommand's word, and how to write it (release needs --force). */
static const struct {
  const char *word, *meant;
} subcommands[] = {{"status", "status"}, {"list", "list"}, {"release", "release --force"}, {"latch", "latch"},
                   {"top", "top"}};

#define MAX_WORD 32 /* longer words are no typo of a subcommand */

/* Edit distance between a and b, ignoring case: insertions, deletions,
 * substitutions and swaps of neighbours ("stauts") cost 1 each. */
static size_t distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  size_t d[MAX_WORD + 1][MAX_WORD + 1];
  for (size_t i = 0; i <= n; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= m; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
      size_t best = d[i - 1][j - 1] + cost;
      if (d[i - 1][j] + 1 < best)
        best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best)
        best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
          tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}

const char *suggest_subcommand(const char *word) {
  size_t len = strlen(word);
  if (len > MAX_WORD)
    return NULL;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcasecmp(word, known[i].word) == 0)
      return known[i].meant;
  /* one edit in a word of up to 4 letters, two in a longer one: "lsit",
   * "stats" and "relase" are typos; "lock" is no more "list" than "latch" */
  const char *best = NULL;
  size_t best_d = len <= 4 ? 2 : 3;
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
    size_t d = distance(word, subcommands[i].word);
    if (d < best_d) {
      best_d = d;
      best = subcommands[i].meant;
    }
  }
  return best;
}

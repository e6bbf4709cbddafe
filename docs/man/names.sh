#!/bin/sh
# The names a section-3 page documents: those of its NAME line, before
# "\-", one a line. make install links each name but the page's own to the
# page (.so); tests/unit/man.sh checks every exported function has one.
#   docs/man/names.sh PAGE
sed -n '/^\.SH NAME/{n;p;q;}' "$1" | sed 's/ *\\-.*//; s/,/ /g' | tr -s ' ' '\n' | sed '/^$/d'

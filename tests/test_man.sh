#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The man pages render cleanly: for each, man -l (groff through man-db)
# prints no warning at 80 columns and the page has a NAME section.
#
# usage: test_man.sh PAGE...      exits 0 pass, 1 fail, 77 skip
set -uo pipefail
if ! command -v man >/dev/null || ! command -v groff >/dev/null; then
	echo "SKIP: man or groff missing (apt-get install man-db groff-base)"
	exit 77
fi
fail=0
for page in "$@"; do
	# MANROFFSEQ='': no preprocessors from the page's first line; the
	# warnings go to stderr, the page itself is dropped.
	warnings=$(MANROFFSEQ='' MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	if [[ -n $warnings ]]; then
		echo "FAIL: $page: $warnings"
		fail=1
	fi
	# grep reads it all: with -q it would stop at the match, and under
	# pipefail a man still writing would fail the pipe.
	if ! MANWIDTH=80 man -l "$page" 2>/dev/null | grep '^NAME' >/dev/null; then
		echo "FAIL: $page has no NAME section"
		fail=1
	fi
	if grep -q '@[A-Z_]*@' "$page"; then
		echo "FAIL: $page has an unsubstituted @VARIABLE@"
		fail=1
	fi
	((fail)) || echo "ok: $page"
done
exit $fail

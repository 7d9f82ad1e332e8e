#!/bin/bash
# Counts the results of every suite log in the given folders and prints one
# line per suite and the closing "N passed, N failed" line. Exits 1 if
# anything failed or no test ran.
#
# usage: summarize.sh [TAG=]DIR...   (a TAG, such as a lane, prefixes the
# names of the suites found in DIR)
#
# Logs are NAME.gtest.log (GoogleTest), NAME.ktap.log (kselftest harness) or
# NAME.pytest.log (pytest -q), NAME.cmd.log (one test: passed if NAME.rc is 0). A suite that crashed
# before printing its totals counts as one failure.
set -u

passed=0
failed=0
skipped=0
# What failed, with the failing cases' names, printed again just above the
# closing line: a CI log that keeps only its tail still says what failed.
failures=""
for arg in "$@"; do
	tag=""
	dir=$arg
	case "$arg" in
	*=*) tag=${arg%%=*}/; dir=${arg#*=} ;;
	esac
	for log in "$dir"/*.log; do
		[ -f "$log" ] || continue
		base=${log%.log}
		kind=${base##*.}
		name=$(basename "${base%.*}")
		rc=$(cat "${base%.*}.rc" 2>/dev/null || echo 1)
		p=0 f=0 s=0
		case "$kind" in
		gtest)
			if grep -q '^\[==========\] .* ran\.' "$log"; then
				p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -1)
				f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?, listed below.*/\1/p' "$log" | tail -1)
				s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?, listed below.*/\1/p' "$log" | tail -1)
				p=${p:-0} f=${f:-0} s=${s:-0}
			else
				f=1
			fi
			;;
		ktap)
			totals=$(grep -E '^# Totals: pass:' "$log" | tail -1)
			if [ -n "$totals" ]; then
				get() { echo "$totals" | sed -n "s/.* $1:\([0-9]*\).*/\1/p"; }
				p=$(($(get pass) + $(get xfail)))
				f=$(($(get fail) + $(get error) + $(get xpass)))
				s=$(get skip)
			else
				f=1
			fi
			;;
		cmd)
			if [ "$rc" = 0 ]; then p=1; else f=1; fi
			;;
		pytest)
			# pytest's closing line: "N passed, M failed, K skipped in Ts"
			# (any of them, any order; errors count as failures).
			totals=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error|errors|xfailed|xpassed)' "$log" | tail -1)
			if [ -n "$totals" ]; then
				get() { echo "$totals" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
				p=$(($(get passed) + $(get xfailed)))
				f=$(($(get failed) + $(get 'errors?') + $(get xpassed)))
				s=$(get skipped)
			else
				f=1
			fi
			;;
		*)
			continue
			;;
		esac
		# A suite whose counts look fine but which exited non-zero failed.
		if [ "$f" = 0 ] && [ "$kind" != cmd ] && [ "$rc" != 0 ]; then
			f=1
		fi
		status=ok
		[ "$f" -gt 0 ] && status=FAIL
		printf '%-4s %-48s %4d passed, %d failed, %d skipped\n' "$status" "$tag$name" "$p" "$f" "$s"
		if [ "$f" -gt 0 ]; then
			cases=$(grep -hE '^\[  FAILED  \] [A-Za-z_]|^not ok |^FAILED |^(ERROR|FAIL):? ' "$log" |
				grep -v 'listed below' | sort -u | head -n 8 | sed 's/^/      /')
			[ -n "$cases" ] || cases="      (last line: $(tail -n 1 "$log" | cut -c1-150))"
			failures+="  $tag$name"$'\n'"$cases"$'\n'
		fi
		passed=$((passed + p))
		failed=$((failed + f))
		skipped=$((skipped + s))
	done
done
[ -z "$failures" ] || printf 'failed:\n%s' "$failures"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]

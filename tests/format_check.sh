#!/usr/bin/env bash
# Every C source and header of the project, and every device kernel source
# (*.cl, the kernel dialect), is as clang-format leaves it
# (style: .clang-format at the root). Exit 77 = skipped. With --fix
# (make format) the same files are rewritten in place instead.
set -u
fix=0
[ "${1:-}" = "--fix" ] && fix=1
src=${ATTN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
want=$(sed -n 's/^# clang-format major version: *\([0-9]*\).*/\1/p' "$src/.clang-format")
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null 2>&1; then
    echo "format_check: skipped: $cf not found"
    exit 77
fi
have=$("$cf" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ -z "$want" ] || [ "$have" != "$want" ]; then
    echo "format_check: skipped: $cf is version $have, the tree is formatted with $want"
    exit 77
fi
cd "$src" || exit 1
mapfile -t files < <(find include common src sim tools bench tests examples fuzz -name '*.[ch]' -o -name '*.cl' | sort)
if [ "$fix" = 1 ]; then
    exec "$cf" -i "${files[@]}"
fi
bad=()
for f in "${files[@]}"; do
    "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
    echo "format_check: ${#bad[@]} of ${#files[@]} files differ from clang-format $want (run make format):"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "format_check: ${#files[@]} files formatted"

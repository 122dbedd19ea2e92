#!/usr/bin/env bash
# Installs the FHIR implementation guide packages of packages.lock into
# packages/NAME/ (the tarball's package/ directory: package.json,
# example/ and the guide's definitions), for rego's TestIGExamplesViews.
#
# Why not `npm ci`: every such package depends on hl7.fhir.r4.core@4.0.1,
# which the npm registry does not hold (npm install fails with ETARGET).
# `npm pack NAME@VERSION` fetches the tarball alone, with no dependency
# resolution; this script then checks its sha512 against the integrity
# packages.lock commits and refuses it, loudly, when they differ.
#
# All or nothing: the packages are unpacked into a fresh directory that
# replaces packages/ only when every one of them is in. `make deps` (and
# `make igexamples`) run it again only when packages.lock or this script
# changed (packages/.custos-installed-lock is the stamp).
set -euo pipefail
cd "$(dirname "$0")"
npm=${NPM:-npm} # the Makefile passes its NPM
command -v "$npm" >/dev/null || { echo "igexamples: npm ($npm) is required" >&2; exit 1; }
command -v node >/dev/null || { echo "igexamples: node is required" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/custos-igexamples.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/packages"
n=0
while read -r spec want rest; do
	case "$spec" in '' | '#'*) continue ;; esac
	name=${spec%@*} version=${spec##*@}
	if [[ -z $name || -z $version || $name == "$spec" || $want != sha512-* || -n $rest ]]; then
		echo "igexamples: packages.lock: want 'NAME@VERSION sha512-...', got: $spec $want $rest" >&2
		exit 1
	fi
	mkdir "$work/$name"
	"$npm" pack "$spec" --pack-destination "$work/$name" --loglevel=error --no-audit --no-fund >/dev/null
	tgz=("$work/$name"/*.tgz)
	if [[ ${#tgz[@]} -ne 1 || ! -f ${tgz[0]} ]]; then
		echo "igexamples: npm pack $spec wrote no single tarball" >&2
		exit 1
	fi
	got=sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "${tgz[0]}")
	if [[ $got != "$want" ]]; then
		echo "igexamples: INTEGRITY MISMATCH for $spec: packages.lock says $want, the tarball fetched is $got; packages/ left as it was" >&2
		exit 1
	fi
	mkdir "$work/packages/$name"
	tar -xzf "${tgz[0]}" -C "$work/packages/$name" --strip-components=1 --no-same-owner
	n=$((n + 1))
done <packages.lock
[[ $n -gt 0 ]] || { echo "igexamples: packages.lock lists no package" >&2; exit 1; }
rm -rf packages
mv "$work/packages" packages
echo "igexamples: $n packages installed in $(pwd)/packages"

#!/usr/bin/env bash
# scripts/fetch-ais.sh: real AIS vessel reports (one hour of New York
# Harbor, 2020-06-30: position, speed and course over ground, heading) into
# data/cache/ais/NYHarbor_2020_06_30_first_hour.csv.  They ship inside the
# PyPI package tracktable-data 1.7.3.1 (US Marine Cadastre AIS data, public
# domain), so pip fetches them; nothing else from it is kept.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

out=data/cache/ais/NYHarbor_2020_06_30_first_hour.csv
if [ -s "$out" ]; then
	echo "fetch-ais: $out present ($(wc -l <"$out") lines)"
	exit 0
fi
mkdir -p data/cache/ais
command -v unzip >/dev/null || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q unzip >/dev/null
if ! ls data/cache/tracktable_data-1.7.3.1-*.whl >/dev/null 2>&1; then
	command -v pip3 >/dev/null || command -v pip >/dev/null ||
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-pip >/dev/null
	echo "fetch-ais: pip download tracktable-data==1.7.3.1 (70 MB)"
	"$(command -v pip3 || command -v pip)" download --no-deps tracktable-data==1.7.3.1 -d data/cache -q
fi
unzip -o -q -j data/cache/tracktable_data-1.7.3.1-*.whl \
	'tracktable_data/python_example_data/NYHarbor_2020_06_30_first_hour.csv' -d data/cache/ais
echo "fetch-ais: $out ($(wc -l <"$out") lines)"

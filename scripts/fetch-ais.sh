#!/usr/bin/env bash
# scripts/fetch-ais.sh: fetch real AIS vessel trails into data/cache/ais/ as
# plain CSV for trail files (data/ATTRIBUTION.md says where they come from).
#
# They ship inside the PyPI wheel tracktable-data 1.7.3.1 (70 MB; US Marine
# Cadastre AIS data, public domain), which pip downloads once into
# data/cache/.  NYHarbor_2020_06_30_first_hour.csv is also kept as shipped
# (the stream demo reads it).  Outputs, one row per position report,
# times in UTC, columns named for `trafficdb-trail write --id mmsi --time ts`:
#   nyharbor_2020_06_30_first_hour.csv  mmsi,ts,lon,lat,sog,cog,heading,
#                                       vessel_name,vessel_type,status,length,width,draft
#   us_coastal_2020_06_30.csv           mmsi,ts,lon,lat,segment   (1,395 trajectories)
#   nyharbor_2020_12_first_week.csv     mmsi,ts,lon,lat,segment   (513 trajectories)
# (`segment` is the trajectory's UUID in tracktable: one vessel may have several.)
# SampleTrajectories.* are synthetic and left out.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TDB_ROOT"

out=data/cache/ais
wheel=data/cache/tracktable_data-1.7.3.1-py3-none-any.whl
src=tracktable_data/python_example_data
if [ -s "$out/us_coastal_2020_06_30.csv" ] && [ -s "$out/nyharbor_2020_12_first_week.csv" ] &&
	[ -s "$out/nyharbor_2020_06_30_first_hour.csv" ] && [ -s "$out/NYHarbor_2020_06_30_first_hour.csv" ]; then
	echo "fetch-ais: $out present"
	exit 0
fi

mkdir -p data/cache "$out"
if [ ! -s "$wheel" ]; then
	python3 -m pip --version >/dev/null 2>&1 ||
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-pip >/dev/null
	echo "fetch-ais: pip download --no-deps tracktable-data==1.7.3.1 (70 MB)"
	python3 -m pip download -q --no-deps --only-binary=:all: -d data/cache 'tracktable-data==1.7.3.1'
fi
[ -s "$wheel" ] || die "fetch-ais: $wheel missing after pip download"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m zipfile -e "$wheel" "$tmp" >/dev/null
cp "$tmp/$src/NYHarbor_2020_06_30_first_hour.csv" "$out/NYHarbor_2020_06_30_first_hour.csv"

python3 - "$tmp/$src" "$out" <<'EOF'
import csv, os, sys

src, out = sys.argv[1], sys.argv[2]

def write_csv(path, header, rows):
    tmp = path + ".tmp"
    n = 0
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow(r)
            n += 1
    os.replace(tmp, path)
    print(f"fetch-ais: {path}: {n} rows")

# MarineCadastre AIS CSV: BaseDateTime,LON,LAT,MMSI,SOG,COG,Heading,VesselName,...
def ais_rows(path):
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            yield [r["MMSI"], r["BaseDateTime"], r["LON"], r["LAT"], r["SOG"], r["COG"],
                   r["Heading"], r["VesselName"], r["VesselType"], r["Status"], r["Length"],
                   r["Width"], r["Draft"]]

write_csv(os.path.join(out, "nyharbor_2020_06_30_first_hour.csv"),
          ["mmsi", "ts", "lon", "lat", "sog", "cog", "heading", "vessel_name", "vessel_type",
           "status", "length", "width", "draft"],
          ais_rows(os.path.join(src, "NYHarbor_2020_06_30_first_hour.csv")))

# tracktable .traj, one trajectory per line:
#   *T*,uuid,domain,npoints,nprops,(name,type,value)*nprops,
#   *P*,domain,dimension,has_object_id,has_timestamp,npointprops,
#   then npoints x (object_id, timestamp, coordinates...)
def traj_rows(path):
    for lineno, line in enumerate(open(path), 1):
        f = line.rstrip("\n").split(",")
        if f[0] != "*T*":
            raise SystemExit(f"{path}:{lineno}: not a trajectory line")
        uuid, npoints, nprops = f[1], int(f[3]), int(f[4])
        i = 5 + 3 * nprops
        if f[i] != "*P*":
            raise SystemExit(f"{path}:{lineno}: no *P* where expected")
        dim, has_oid, has_ts, npp = int(f[i + 2]), f[i + 3], f[i + 4], int(f[i + 5])
        if (dim, has_oid, has_ts, npp) != (2, "1", "1", 0):
            raise SystemExit(f"{path}:{lineno}: unexpected point layout {f[i:i+6]}")
        pts = f[i + 6:]
        if len(pts) != 4 * npoints:
            raise SystemExit(f"{path}:{lineno}: {len(pts)} point fields for {npoints} points")
        for k in range(npoints):
            oid, ts, lon, lat = pts[4 * k: 4 * k + 4]
            yield [oid, ts.replace(" ", "T"), lon, lat, uuid]

for name, outname in [("US_coastal_2020_06_30.traj", "us_coastal_2020_06_30.csv"),
                      ("NYHarbor_2020_12_first_week.traj", "nyharbor_2020_12_first_week.csv")]:
    write_csv(os.path.join(out, outname), ["mmsi", "ts", "lon", "lat", "segment"],
              traj_rows(os.path.join(src, name)))
EOF

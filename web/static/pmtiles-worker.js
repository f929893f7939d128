// Loaded into MapLibre's workers (maplibregl.importScriptInWorkers, app.js):
// the base map's tiles are read from the PMTiles archives in the worker that
// parses them, not on the page's main thread (busy compiling shaders and
// drawing during the first view; the archives' TileJSON still comes from
// the main thread's protocol).
// (a worker made from a blob: URLs must be absolute; its origin is the page's)
importScripts(new URL(self.location.href.replace(/^blob:/, '')).origin + '/vendor/pmtiles/pmtiles.js');
self.addProtocol('pmtiles', new self.pmtiles.Protocol().tile);

// Preloaded into a service (`--import`, through SERVICE_NODE_FLAGS) by `npm run bench --
// --allocations`: V8's sampling heap profiler over the whole life of the process,
// counting the objects young and full collections freed too, so the profile says where
// the process allocates (what its collector works through), not only what is alive at
// the end. One sample about every 32 KiB allocated. At exit the profile is written to
// OTM_ALLOCATION_PROFILE_DIR as <pid>.heapprofile (`npm run profile:summary` reads it).
// Plain JavaScript: Node loads it before any TypeScript loader.
import fs from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';

const dir = process.env.OTM_ALLOCATION_PROFILE_DIR;
if (dir) {
  const session = new inspector.Session();
  session.connect();
  session.post('HeapProfiler.enable');
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 32 * 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  // An in-process session answers synchronously, so the profile is written before the process ends.
  process.once('exit', () => {
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (!error) fs.writeFileSync(path.join(dir, `${process.pid}.heapprofile`), JSON.stringify(result.profile));
    });
  });
}

# Alternated A/B of lethe binaries on one demo (BENCHMARKS.md sections 35-37):
#   python3 scripts/ab_erase.py DEMO_NAME ROUNDS 'label=/path/to/lethe[;VAR=value...]' ...
# DEMO_NAME is a demo at /tmp/DEMO_NAME with a pristine copy at /tmp/DEMO_NAME.pristine (made
# with `cp -a` after `lethe demo init --dir /tmp/DEMO_NAME`); each run restores it, then times
# `lethe erase` of learner 3590 as a whole process with perf_counter. Rounds alternate the
# binaries' order; prints each label's wall median, best and mean, and the medians of its user
# and system CPU time and minor page faults (from wait4). Copy the binaries anew together
# before comparing them (section 35: a binary's page-cache state moves an erasure by ~20%).
# A spec's binary may end in @OTHER_DEMO to run on /tmp/OTHER_DEMO instead (two demos, one
# binary: section 39's bloom-filter copy of the scale-100 demo).
import subprocess,time,sys,statistics,os
D=sys.argv[1]; R=int(sys.argv[2]); specs=sys.argv[3:]
def parse(s):
    label,rest=s.split('=',1); parts=rest.split(';'); env=dict(os.environ)
    for kv in parts[1:]:
        k,v=kv.split('=',1); env[k]=v
    binary,_,demo=parts[0].partition('@')
    return label,binary,env,demo or D
specs=[parse(s) for s in specs]
res={l:[] for l,_,_,_ in specs}
for r in range(R):
    order=specs if r%2==0 else specs[::-1]
    for l,b,env,d in order:
        subprocess.run(f"rm -rf /tmp/{d} && cp -a /tmp/{d}.pristine /tmp/{d} && sync",shell=True)
        t=time.perf_counter()
        p=subprocess.Popen([b,'erase','--subject','learner=3590','--request','e-1','--min-age','0','--json'],cwd=f'/tmp/{d}',stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL,env=env)
        _,status,use=os.wait4(p.pid,0)
        wall=time.perf_counter()-t
        assert status==0,(l,status)
        res[l].append((wall,use.ru_utime,use.ru_stime,use.ru_minflt))
for l,v in res.items():
    walls=[x[0] for x in v]
    med=lambda i: statistics.median(x[i] for x in v)
    print(f"{l:14s} median {statistics.median(walls)*1000:6.1f} ms  best {min(walls)*1000:6.1f}  mean {statistics.mean(walls)*1000:6.1f}"
          f"  user {med(1)*1000:6.1f}  sys {med(2)*1000:6.1f}  faults {med(3):.0f}")

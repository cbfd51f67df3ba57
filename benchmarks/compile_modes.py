"""The fused key side of Eq. (12) (forward + backward, Beauty-sized: n = 34,464, d = 64, bf16, one thread) in eager
mode, compiled with the default mode, and compiled with mode="max-autotune", interleaved in one process; prints
medians of 5. Usage: python benchmarks/compile_modes.py
"""
import sys, time, torch
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from recbole_mgformer.model.key_summary import chunked_key_summary, ChunkFunctions, summary_of_chunk, gradients_of_chunk, EAGER
torch.set_num_threads(1)
g=torch.Generator().manual_seed(0)
n,d=34464,64
E=(torch.randn(n,d,generator=g)*0.1).requires_grad_()
P=torch.randn(n,d,generator=g)*0.1
W=(torch.randn(128,128,generator=g)*0.1).requires_grad_()
proj=torch.randn(1,128,128,generator=g)
z=torch.rand(n,generator=g).requires_grad_()
class Auto(ChunkFunctions):
    def __init__(self, mode):
        self.keep=False
        self.summary=torch.compile(summary_of_chunk, dynamic=False, mode=mode)
        self.gradients=torch.compile(gradients_of_chunk, dynamic=False, mode=mode)
variants={"eager":EAGER,"compile":ChunkFunctions(compile=True),"max-autotune":Auto("max-autotune")}
def step(F):
    s=chunked_key_summary(E,P,W,proj,z,torch.bfloat16,2048,F); s.sum().backward()
t0=time.time()
for k,F in variants.items():
    t=time.time(); step(F); step(F); print(k,"warm-up s",round(time.time()-t,1), flush=True)
res={k:[] for k in variants}
for r in range(5):
    for k,F in variants.items():
        t=time.perf_counter(); step(F); res[k].append(time.perf_counter()-t)
for k,v in res.items(): print(k, "fwd+bwd ms", round(sorted(v)[2]*1000,1))

#!/usr/bin/python3
"""Stand-in for IndexTTS2's webui.py: same flags, same start-up order, same failures.

The model is built at module level, run-time downloads included (through
hfclient, which behaves like huggingface_hub), and only then the port is bound:
"port open" means "model loaded", as with the real web UI. See INDEXTTS2.md.

Two generations (--sim-generation, or SIM_GENERATION; default 2026):
  classic  index-tts c439958 (2025): required files or exit 1, the hub cache
           (hfclient), SIM_CACHE_BUG=1 reproduces the cache-path bug (#690).
  2026     index-tts ee40fa7 (INDEXTTS2.md "Current start-up"): snapshot_download
           of the main repo (8 at once) when required files are missing,
           ensure_config_available, need_proxy() probes (USE_MODELSCOPE),
           examples, ensure_models_available into <model_dir>/hf_cache/ (flat,
           local_dir downloads, copy2; an old models-- cache is copied), through
           hfhub (huggingface_hub 0.35 + Xet), msclient (ModelScope) or hf-mirror;
           --version 2|2.5 picks IndexTeam/IndexTTS-2 or -2.5. Run it inside
           world.py (the hosts are looked up by name, over HTTPS).
Environment: HF_* (read by the hub client at import).
"""
import json
import os
import sys
import time

# pandas is webui.py's first heavy import; numpy stands in for it.
import numpy as np  # noqa: F401  (imported for its start-up cost, like pandas)

import argparse

T0 = time.monotonic()
# The launcher redirects stdout to a log: flush each line so the log follows start-up.
sys.stdout.reconfigure(line_buffering=True)
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)

parser = argparse.ArgumentParser(description="IndexTTS WebUI",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--verbose", action="store_true", default=False, help="Enable verbose mode")
parser.add_argument("--port", type=int, default=7860, help="Port to run the web UI on")
parser.add_argument("--host", type=str, default="0.0.0.0", help="Host to run the web UI on")
parser.add_argument("--model_dir", type=str, default="./checkpoints", help="Model checkpoints directory")
parser.add_argument("--fp16", action="store_true", default=False, help="Use FP16 for inference if available")
parser.add_argument("--deepspeed", action="store_true", default=False, help="Use DeepSpeed to accelerate if available")
parser.add_argument("--cuda_kernel", action="store_true", default=False, help="Use CUDA kernel for inference if available")
parser.add_argument("--gui_seg_tokens", type=int, default=120, help="GUI: Max tokens per generation segment")
parser.add_argument("--version", choices=("2", "2.5"), default="2.5",
                    help="IndexTTS version (2026 generation only)")
parser.add_argument("--sim-generation", choices=("classic", "2026"),
                    default=os.environ.get("SIM_GENERATION") or "2026",
                    help="simulator: which IndexTTS2 start-up to reproduce (env SIM_GENERATION)")
if (os.environ.get("SIM_GENERATION") or "2026") not in ("classic", "2026"):
    parser.error(f"SIM_GENERATION={os.environ['SIM_GENERATION']!r}: expected classic or 2026")
cmd_args = parser.parse_args()
GEN2026 = cmd_args.sim_generation == "2026"
REQUIRED = ["bpe.model", "gpt.pth", "config.yaml", "s2mel.pth", "wav2vec2bert_stats.pt"]

if not GEN2026:
    if not os.path.exists(cmd_args.model_dir):
        print(f"Model directory {cmd_args.model_dir} does not exist. Please download the model first.")
        sys.exit(1)

    for file in REQUIRED:
        file_path = os.path.join(cmd_args.model_dir, file)
        if not os.path.exists(file_path):
            print(f"Required file {file_path} does not exist. Please download it.")
            sys.exit(1)

    CACHE_BUG = os.environ.get("SIM_CACHE_BUG", "") not in ("", "0")
    if not CACHE_BUG and "HF_HUB_CACHE" not in os.environ:
        # IndexTTS2's later fix: keep downloads in the project, set before the hub
        # client is imported. A cache chosen by the environment wins.
        os.environ["HF_HUB_CACHE"] = os.path.join(cmd_args.model_dir, "hf_cache")

    # gradio's imports: huggingface_hub (reads its settings now), fastapi, uvicorn.
    import hfclient  # noqa: E402
    import fastapi  # noqa: E402
    import uvicorn  # noqa: E402

    if CACHE_BUG:
        # indextts/infer_v2.py, at import: too late, hfclient already read HF_HUB_CACHE,
        # so the downloads land in $HF_HOME/hub (index-tts issue #690).
        os.environ["HF_HUB_CACHE"] = "./checkpoints/hf_cache"
    fetch = hfclient.hf_hub_download
else:
    # gradio's imports first: huggingface_hub reads its settings (HF_HUB_CACHE is
    # no longer set anywhere), then IndexTTS2's download helpers.
    import hfhub  # noqa: E402,F401  (its settings are read now)
    import fastapi  # noqa: E402
    import uvicorn  # noqa: E402
    import indextts2026 as itts  # noqa: E402

    os.makedirs(cmd_args.model_dir, exist_ok=True)
    repo = "IndexTeam/IndexTTS-2.5" if cmd_args.version == "2.5" else "IndexTeam/IndexTTS-2"
    missing = [f for f in REQUIRED if f != "config.yaml"
               and not os.path.exists(os.path.join(cmd_args.model_dir, f))]
    if missing:
        print(f">> Required files missing in {cmd_args.model_dir} ({', '.join(missing)}): "
              f"downloading {repo}...", flush=True)
        itts.snapshot_download(repo, cmd_args.model_dir)
    itts.ensure_config_available(cmd_args.model_dir)
    # indextts/utils/examples_downloader.py, at module level: need_proxy() again.
    itts.ensure_examples_available(os.getcwd())
    PATHS = itts.ensure_models_available(cmd_args.model_dir)

    def fetch(repo_id, filename):
        # Model loads use local_files_only: the flat layout's files.
        return itts.local_path(PATHS, repo_id, filename)

import socket  # noqa: E402
import io  # noqa: E402
import threading  # noqa: E402
import wave  # noqa: E402

import torch  # noqa: E402
import yaml  # noqa: E402

import stformat  # noqa: E402


def log(msg):
    print(msg)


def vlog(msg):
    if cmd_args.verbose:
        print(f"[{time.monotonic() - T0:7.2f}s] {msg}")


class IndexTTS2:
    """The construction order of indextts/infer_v2.py's IndexTTS2.__init__."""

    SAMPLE_RATE = 22050  # bigvgan_v2_22khz_80band_256x

    def __init__(self, cfg_path, model_dir, use_fp16=False, use_deepspeed=False, use_cuda_kernel=False):
        # 1. config and device
        with open(cfg_path) as f:
            self.cfg = yaml.safe_load(f)
        self.model_dir = model_dir
        self.device = "cpu"
        self.use_fp16 = False  # no CUDA: fp16 and the CUDA kernel are switched off
        self.use_cuda_kernel = False
        log(">> Be patient, it may take a while to run in CPU mode.")
        if use_fp16 or use_cuda_kernel:
            log(">> fp16 / cuda_kernel need CUDA: ignored on CPU")
        self.mapped = {}  # name -> mmapped tensor; touched by every synthesis

        # 2. emotion model: tokenizer + safetensors, mapped (pages come in lazily)
        qwen = os.path.join(model_dir, self.cfg["qwen_emo_path"])
        with open(os.path.join(qwen, "tokenizer.json")) as f:
            self.qwen_vocab = json.load(f)["model"]["vocab"]
        self._map("qwen_emo", os.path.join(qwen, "model.safetensors"))
        vlog(f"emotion model mapped from {qwen}")

        # 3. gpt.pth: torch.load reads it all
        gpt_path = os.path.join(model_dir, self.cfg["gpt_checkpoint"])
        self.gpt = torch.load(gpt_path, map_location="cpu")
        if use_deepspeed:
            try:
                import deepspeed  # noqa: F401
            except ImportError:
                log(">> Failed to load DeepSpeed. Falling back to normal inference.")
        log(f">> GPT weights restored from: {gpt_path}")

        # 4. w2v-bert-2.0 via from_pretrained (config, then mmapped safetensors), its stats
        fetch("facebook/w2v-bert-2.0", "config.json")
        self._map("w2v_bert", fetch("facebook/w2v-bert-2.0", "model.safetensors"))
        self.w2v_stats = torch.load(os.path.join(model_dir, self.cfg["w2v_stat"]), map_location="cpu")

        # 5. MaskGCT semantic codec: safetensors.torch.load_model copies the weights in
        path = fetch("amphion/MaskGCT", "semantic_codec/model.safetensors")
        tensors, _ = stformat.mmap_tensors(path)
        self.semantic_codec = {k: v.clone() for k, v in tensors.items()}
        log(f">> semantic_codec weights restored from: {path}")

        # 6. s2mel.pth
        s2mel_path = os.path.join(model_dir, self.cfg["s2mel_checkpoint"])
        self.s2mel = torch.load(s2mel_path, map_location="cpu")["net"]
        log(f">> s2mel weights restored from: {s2mel_path}")

        # 7. campplus speaker model
        path = fetch("funasr/campplus", "campplus_cn_common.bin")
        self.campplus = torch.load(path, map_location="cpu")
        log(f">> campplus_model weights restored from: {path}")

        # 8. BigVGAN: the hub mixin and BigVGAN._from_pretrained each fetch config.json
        name = self.cfg["vocoder"]["name"]
        fetch(name, "config.json")
        with open(fetch(name, "config.json")) as f:
            self.bigvgan_cfg = json.load(f)
        self.bigvgan = torch.load(fetch(name, "bigvgan_generator.pt"),
                                  map_location="cpu")["generator"]
        log(f">> bigvgan weights restored from: {name}")

        # 9. text normaliser (builds its cache on first run), bpe, speaker/emotion matrices
        self._text_normalizer()
        bpe_path = os.path.join(model_dir, self.cfg["dataset"]["bpe_model"])
        with open(bpe_path, encoding="utf-8") as f:
            self.pieces = [line.split("\t", 1)[0] for line in f if "\t" in line]
        log(f">> bpe model loaded from: {bpe_path}")
        self.spk_matrix = torch.load(os.path.join(model_dir, self.cfg["spk_matrix"]), map_location="cpu")
        self.emo_matrix = torch.load(os.path.join(model_dir, self.cfg["emo_matrix"]), map_location="cpu")
        self.lock = threading.Lock()

    def _map(self, label, path):
        tensors, _ = stformat.mmap_tensors(path)
        for k, v in tensors.items():
            self.mapped[f"{label}.{k}"] = v

    def _text_normalizer(self):
        # Like wetext's FSTs in indextts/utils/tagger_cache: built (slowly) on the
        # first start, then read back. Relative to the app directory (cwd).
        cache = os.path.join("indextts", "utils", "tagger_cache")
        names = ["zh_tn_tagger.fst", "zh_tn_verbalizer.fst", "en_tn_tagger.fst", "en_tn_verbalizer.fst"]
        if not all(os.path.exists(os.path.join(cache, n)) for n in names):
            os.makedirs(cache, exist_ok=True)
            g = torch.Generator().manual_seed(5)
            for n in names:
                fst = torch.randint(0, 256, (256 * 1024,), generator=g, dtype=torch.uint8)
                fst = torch.cumsum(fst.to(torch.int64), 0).to(torch.uint8)  # a little real work
                tmp = os.path.join(cache, n + ".tmp")
                with open(tmp, "wb") as f:
                    f.write(fst.numpy().tobytes())
                os.replace(tmp, os.path.join(cache, n))
        self.tn_bytes = sum(len(open(os.path.join(cache, n), "rb").read()) for n in names)
        log(">> TextNormalizer loaded")

    def touch_mapped(self):
        """Read one value per 4 KiB page of every mmapped tensor.

        Pages not resident (first request, or evicted) cost a page fault each:
        what makes a first inference slower and what mlock avoids.
        """
        total, pages = 0.0, 0
        for t in self.mapped.values():
            flat = t.reshape(-1)
            step = max(1, 4096 // t.element_size())
            total += float(flat[::step].float().sum())
            pages += (flat.numel() + step - 1) // step
        return total, pages

    def infer(self, text):
        """Text -> 16-bit PCM mono WAV bytes, computed from the loaded weights."""
        with self.lock:
            emb = self.gpt["text_embedding.weight"]
            ids = torch.tensor([(ord(c) * 2654435761) % emb.shape[0] for c in text])
            h = emb[ids]
            d = h.shape[1]
            for k in sorted(k for k in self.gpt if k.startswith("gpt.h."))[:6]:
                w = self.gpt[k].reshape(-1)[: d * d].reshape(d, d)
                h = torch.tanh(h @ w * 8)
            energy, pages = self.touch_mapped()
            # One voiced segment per character: pitch and loudness from the hidden state.
            f0 = 110.0 + 220.0 * torch.sigmoid(h[:, 0] * 20)
            amp = 0.25 + 0.25 * torch.sigmoid(h[:, 1] * 20)
            n = int(self.SAMPLE_RATE * 0.12)
            f0s = f0.repeat_interleave(n)
            env = torch.hann_window(n).repeat(len(text)) * amp.repeat_interleave(n)
            phase = torch.cumsum(2 * torch.pi * f0s / self.SAMPLE_RATE, 0)
            audio = env * (torch.sin(phase) + 0.3 * torch.sin(2 * phase) + 0.1 * torch.sin(3 * phase))
            pcm = (audio / audio.abs().max().clamp(min=1e-6) * 0.8 * 32767).to(torch.int16)
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(self.SAMPLE_RATE)
            w.writeframes(pcm.numpy().tobytes())
        vlog(f"synthesized {len(text)} chars, touched {pages} mapped pages (sum {energy:.3f})")
        return buf.getvalue()


if GEN2026:
    log(f">> IndexTTS {cmd_args.version}, models in {os.path.join(cmd_args.model_dir, 'hf_cache')}")
else:
    log(f">> hub endpoint {hfclient.ENDPOINT}, cache {hfclient.HF_HUB_CACHE}")
tts = IndexTTS2(model_dir=cmd_args.model_dir, cfg_path=os.path.join(cmd_args.model_dir, "config.yaml"),
                use_fp16=cmd_args.fp16, use_deepspeed=cmd_args.deepspeed,
                use_cuda_kernel=cmd_args.cuda_kernel)
log(f">> model loaded in {time.monotonic() - T0:.2f}s")

app = fastapi.FastAPI(title="IndexTTS WebUI (simulator)")

PAGE = """<!doctype html><title>IndexTTS2 (simulator)</title>
<h1>IndexTTS2 (simulator)</h1>
<form action="/synthesize"><input name="text" value="Hello, world" size="60">
<button>Synthesize</button></form>"""
MAX_TEXT = 2000


@app.get("/", response_class=fastapi.responses.HTMLResponse)
def index():
    return PAGE


def _synthesize(text):
    if not text or len(text) > MAX_TEXT:
        raise fastapi.HTTPException(400, f"text must be 1..{MAX_TEXT} characters")
    return fastapi.Response(content=tts.infer(text), media_type="audio/wav")


@app.get("/synthesize")
def synthesize_get(text: str = ""):
    return _synthesize(text)


@app.post("/synthesize")
def synthesize_post(body: dict = fastapi.Body(...)):
    return _synthesize(str(body.get("text", "")))


def bind(host, port):
    """Bind the port as gradio does before launching: a taken port is fatal."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise OSError(f"Cannot find empty port in range: {port}-{port}. You can specify a different "
                      "port by setting the GRADIO_SERVER_PORT environment variable or passing the "
                      "`server_port` parameter to `launch()`.") from None
    sock.listen(2048)
    return sock


if __name__ == "__main__":
    sock = bind(cmd_args.host, cmd_args.port)
    log(f"* Running on local URL:  http://{cmd_args.host}:{cmd_args.port}")
    server = uvicorn.Server(uvicorn.Config(app, log_level="info" if cmd_args.verbose else "warning"))
    server.run(sockets=[sock])

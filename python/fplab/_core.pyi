"""Type stubs of fplab._core, the C++ module (python/src/); fplab/__init__.py is the public face."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import ArrayLike

__version__: str

class Error(ValueError):
    """A bad format, rounding mode, schedule, profile, file or array: the fplab command's one-line message."""

class Schedule:
    """A reduction order (docs/schedules.md), parsed from text or a preset name."""

    def __init__(self, text: str) -> None: ...
    @property
    def text(self) -> str:
        """The canonical text (presets expanded)."""
    @property
    def nondeterministic(self) -> bool:
        """True if a step draws from the implementation-noise stream (atomic, shuffle)."""
    @property
    def order_independent(self) -> bool:
        """True if the result cannot depend on the order (only exact or binned reductions)."""
    def dot(self, n: int, *, impl_seed: int = 0) -> str:
        """The tree of additions for n terms as Graphviz DOT text."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class Arithmetic:
    """The arithmetic of a reduction: format, rounding mode, products, flushing, saturation."""

    def __init__(
        self,
        format: str = "fp32",
        mode: str = "rne",
        products: str = "fused",
        *,
        flush_subnormals: bool = False,
        saturate: bool = False,
        sr_bits: int = 64,
    ) -> None: ...
    @property
    def format(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def products(self) -> str: ...
    @property
    def flush_subnormals(self) -> bool: ...
    @property
    def saturate(self) -> bool: ...
    @property
    def sr_bits(self) -> int: ...
    @property
    def text(self) -> str:
        """As the command line prints it: 'fp32/rne/fused'."""

class OpChoice:
    """One operation kind's schedule and arithmetic in a profile's table."""

    @property
    def schedule(self) -> Schedule: ...
    @property
    def arithmetic(self) -> Arithmetic: ...
    @property
    def nondeterministic(self) -> bool: ...
    def arguments(self) -> Dict[str, Any]:
        """The keyword arguments of fplab.reduce, dot and matmul for this choice."""

class LayerRule:
    """A profile's exception for some layers (docs/profiles.md, "Layer rules")."""

    @property
    def match(self) -> str: ...
    @property
    def ops(self) -> Dict[str, OpChoice]: ...
    @property
    def conv_wgrad(self) -> Optional[str]:
        """'winograd', 'gemm', or None where the rule does not say how a convolution's weight
        gradient is computed."""
    @property
    def batch_norm(self) -> Optional[str]:
        """'cudnn', 'fplab', or None where the rule does not say what arithmetic a batch norm
        takes in training."""
    def matches(self, layer: str, in_: int, out: int, kernel: int = 0, stride: int = 0, height: int = 0,
                batch: int = 0) -> bool:
        """Whether it applies to a layer: 'conv', 'linear' or 'bn' (in_: channels; height; batch)."""

class Profile:
    """A hardware profile: per operation kind a schedule and arithmetic, default and deterministic."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def parallelism(self) -> Dict[str, int]: ...
    @property
    def default(self) -> Dict[str, OpChoice]: ...
    @property
    def deterministic(self) -> Dict[str, OpChoice]: ...
    @property
    def layer_rules(self) -> Dict[str, List[LayerRule]]: ...
    @property
    def conv_dgrad(self) -> Dict[str, str]:
        """How each table adds a convolution's input gradient: {mode: 'col2im' or 'direct'}."""

def round(
    x: ArrayLike,
    format: str,
    mode: str = "rne",
    saturate: bool = False,
    flush_subnormals: bool = False,
    seed: int = 0,
    *,
    saturate_infinities: bool = False,
    sr_bits: int = 64,
    random_bits: Optional[ArrayLike] = None,
) -> np.ndarray:
    """Every element of x rounded to the format (float64 values, x's shape)."""

def mx_quantize(
    x: ArrayLike, element_format: str, block: int = 32, mode: str = "rne", seed: int = 0
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OCP MX blocks along x's last axis: (e8m0 scale bits, element values, dequantized values)."""

def reduce(x: ArrayLike, schedule: Schedule, arithmetic: Arithmetic, impl_seed: int = 0) -> float:
    """One reduction of the 1-D array x in the schedule's order (sim::reduce)."""

def dot(a: ArrayLike, b: ArrayLike, schedule: Schedule, arithmetic: Arithmetic, impl_seed: int = 0) -> float:
    """The products a[i] * b[i] of two 1-D arrays reduced in the schedule's order."""

def matmul(
    a: np.ndarray,
    b: np.ndarray,
    schedule: Schedule,
    arithmetic: Arithmetic,
    impl_seed: int = 0,
    op_id: int = 0,
    call: int = 0,
    *,
    out: Optional[np.ndarray] = None,
) -> np.ndarray:
    """C = A B for 2-D float32 arrays (sim::gemm), stored as float32 (into ``out``, a writeable
    C-contiguous float32 array of C's shape, when given)."""

def reduce_batch(
    terms: ArrayLike, schedule: Schedule, arithmetic: Arithmetic, impl_seed: int = 0, op_id: int = 0, call: int = 0
) -> np.ndarray:
    """Every column of the 2-D terms (k, outputs) reduced along axis 0 in the schedule's order
    (sim::reduce_batch): float64 (outputs,). Atomic and shuffle steps draw per tile of 64 outputs."""

def reduce_planes(
    x: np.ndarray, schedule: Schedule, arithmetic: Arithmetic, impl_seed: int = 0, op_id: int = 0, call: int = 0
) -> np.ndarray:
    """reduce_batch of the float32 planes x (B, C, P) seen as terms (B*P, C): output c sums x[b, c, p]
    in the order b*P + p (a batch norm's statistics), without a transposed copy: float64 (C,)."""

def im2col(
    x: np.ndarray,
    kernel: Tuple[int, int],
    stride: Tuple[int, int],
    padding: Tuple[int, int],
    dilation: Tuple[int, int],
    c0: int = 0,
    channels: int = -1,
    transposed: bool = False,
    *,
    out: Optional[np.ndarray] = None,
) -> np.ndarray:
    """The im2col columns of channels [c0, c0 + channels) of the float32 array x (B, C, H, W):
    (B*Ho*Wo) x (C*kh*kw), rows (b, oy, ox), columns (c, i, j), zero padding; transposed:
    (C*kh*kw) x (B*Ho*Wo) (models/conv2d.cpp's layouts). Into ``out`` when given."""

def dgrad_taps(
    g: np.ndarray,
    input_hw: Tuple[int, int],
    kernel: Tuple[int, int],
    stride: Tuple[int, int],
    padding: Tuple[int, int],
    dilation: Tuple[int, int],
    c0: int = 0,
    channels: int = -1,
    *,
    out: Optional[np.ndarray] = None,
) -> np.ndarray:
    """The terms of a direct convolution input gradient (conv_dgrad "direct") from the output
    gradient g (B, C_out, Ho, Wo) of an input of input_hw = (H, W): (B*H*W) x (C*kh*kw) for channels
    [c0, c0 + channels), row (b, y, x), column (c, i, j), g where that tap of that pixel meets an
    output, else +0. Into ``out`` when given."""

def col2im(
    dcols: np.ndarray,
    shape: Tuple[int, int, int, int],
    kernel: Tuple[int, int],
    stride: Tuple[int, int],
    padding: Tuple[int, int],
    dilation: Tuple[int, int],
) -> np.ndarray:
    """The input gradient (B, C, H, W) of the columns' gradient dcols ((B*Ho*Wo) x (C*kh*kw)): every
    element the float32 sum, from +0, of its terms in the order of the rows (models/conv2d.cpp)."""

def transpose_batches(x: np.ndarray) -> np.ndarray:
    """The float32 array x (B, M, N) as (B, N, M): every batch's matrix transposed (a copy)."""

def noise_op_id(layer: int, op_kind: str, part: int = 0) -> int:
    """The noise key's op id of reduction `part` of kind `op_kind` at position `layer`, as the C++
    training forms it (models::Context::key: mix_key({layer, op kind, part}))."""

def nccl_all_reduce(
    buffers: ArrayLike, algorithm: str = "Ring", protocol: str = "Simple", channels: int = 1, format: str = "fp32",
    rings: Sequence[Sequence[int]] = ...,
) -> np.ndarray:
    """NCCL's all-reduce (sum) of the rows of buffers (one per rank), each element added in NCCL's
    order for that algorithm, protocol and channel count, rounded in format at every addition."""

def exact_sum(x: ArrayLike, format: str = "fp64", *, round_terms: bool = False) -> float:
    """The exact sum of every element of x (each first rounded to nearest in the format when
    round_terms), rounded once to nearest even in the format."""

def profile_names(profiles_dir: Sequence[str] = ...) -> List[str]:
    """Every profile name the search path knows, sorted."""

def find_profile(name: str, profiles_dir: Sequence[str] = ...) -> Profile:
    """A profile by name or .toml path."""

# --- what a PyTorch script needs to reproduce a `fplab train` run (fplab.torch.models) ---

class Dataset:
    """An image-classification data set as fplab train reads it (models/dataset.hpp): images normalised
    once, (x/255 - mean) / std rounded to float32, mean and std from the training pixels."""

    def images(self, split: str = "train") -> np.ndarray:
        """(N, C, H, W) float32, read-only, no copy."""
    def labels(self, split: str = "train") -> np.ndarray:
        """(N,) uint8, read-only."""
    def batch(
        self, examples: Sequence[int], epoch: int = 0, algo_seed: int = 1, augment_pad: int = 0, flip: bool = False
    ) -> Tuple[np.ndarray, np.ndarray]:
        """Training examples as one batch, augmented as fplab train does (models::make_batch)."""
    @property
    def mean(self) -> float: ...
    @property
    def std(self) -> float: ...
    @property
    def background(self) -> float:
        """The normalised value of a black pixel (a random crop's padding)."""
    @property
    def class_names(self) -> List[str]: ...
    @property
    def classes(self) -> int:
        """The number of classes (the model's outputs)."""

def load_fashion_mnist(dir: str = "/usr/share/datasets/fashion-mnist") -> Dataset:
    """Fashion-MNIST from its four IDX files (models::load_fashion_mnist)."""

def load_image_dataset(dir: str = "/usr/share/datasets/fashion-mnist") -> Dataset:
    """The data set in folder `dir` as fplab train --data-dir reads it (standard IDX names, .gz or not, classes.txt)."""

def load_idx_dataset(train_images: str, train_labels: str, test_images: str, test_labels: str) -> Dataset:
    """Any IDX image/label pair of files (models::load_idx_dataset)."""

def training_examples(
    labels: ArrayLike, subset: int = 0, imbalance_class: int = -1, imbalance_percent: float = 100.0, seed: int = 1
) -> np.ndarray:
    """The training examples fplab train selects (models::select_training_examples): int64, ascending."""

def epoch_order(count: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of 0..count-1 that epoch `epoch` visits the selected examples in (int64)."""

def dropout_mask(seed: int, layer: int, step: int, p_drop: float, count: int) -> np.ndarray:
    """Which of `count` activations the Dropout layer `layer` keeps at step `step` (bool)."""

def initial_model(
    model: str = "mlp",
    hidden: Sequence[int] = ...,
    kernel: int = 3,
    dropout: float = 0.0,
    algo_seed: int = 1,
    input_shape: Sequence[int] = ...,
    classes: int = 10,
    flip_weight: int = -1,
) -> List[Dict[str, Any]]:
    """fplab's model's layers with the initial weights of fplab train: [{'index', 'layer', 'parameters':
    [{'name', 'value' (fplab's layout), 'weight_decay'}], 'buffers'}]."""

def read_checkpoint(path: str) -> Dict[str, np.ndarray]:
    """The named arrays of an fplab checkpoint or --save-weights file, in file order."""

def exp(x: ArrayLike) -> np.ndarray:
    """exp of a float32 array elementwise as the C++ layers compute it (the C library's expf)."""

def log(x: ArrayLike) -> np.ndarray:
    """log of a float32 array elementwise as the C++ layers compute it (logf)."""

def cudnn_nchw_why_not(batch: int, positions: int, backward: bool = False) -> str:
    """Why the model of cuDNN's NCHW BatchNorm kernels cannot take a channel of batch x positions values
    ('' when it can)."""
def cudnn_nchw_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                       eps: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """cuDNN's bn_fw_tr_1C11_kernel_NCHW on float32 planes (B, C, P): (y, mean, inv_std, var)."""
def cudnn_nchw_backward(g: np.ndarray, x: np.ndarray, mean: np.ndarray, inv_std: np.ndarray,
                        gamma: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """cuDNN's bn_bw_1C11_kernel_new: (dx, dgamma, dbeta)."""
def dot_planes(a: np.ndarray, b: np.ndarray, schedule: Schedule, arithmetic: Arithmetic, impl_seed: int,
               op_ids: Sequence[int], call: int) -> np.ndarray:
    """Per channel c the dot product of the float32 planes a[:, c, :] and b[:, c, :] (B, C, P), terms
    in the order b*P + p, as a 1 x n by n x 1 matmul keyed op_ids[c]: float32 (C,)."""

def channel_fma(x: np.ndarray, scale: np.ndarray, addend: np.ndarray) -> np.ndarray:
    """fma(x[b, c, p], scale[c], addend) rounded once, for float32 x (B, C, P), scale (C,) and the
    addend per channel (C,) or per element (B, C, P): a float32 array of x's shape."""

def cuda_rsqrt(x: ArrayLike) -> np.ndarray:
    """rsqrtf of every element of a float32 array as an NVIDIA GPU computes it (measured on an
    H200: not correctly rounded; fp/cuda_rsqrt.hpp), a float32 array of x's shape."""

def train(
    data: Dataset,
    ops: Dict[str, OpChoice],
    *,
    model: str = "mlp",
    hidden: Sequence[int] = ...,
    kernel: int = 3,
    dropout: float = 0.0,
    optimizer: str = "adam",
    lr: float = 0.001,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    decay_every: int = 0,
    decay_factor: float = 0.1,
    epochs: int = 1,
    batch: int = 64,
    subset: int = 0,
    imbalance_class: int = -1,
    imbalance_percent: float = 100.0,
    augment_pad: int = 0,
    flip: bool = False,
    algo_seed: int = 1,
    impl_seed: int = 1,
    on_step: Optional[Callable[[int, np.ndarray], None]] = None,
    layer_rules: Sequence[LayerRule] = ...,
    conv_dgrad: str = "col2im",
) -> Dict[str, Any]:
    """fplab train's loop (models::train) with ops {op kind: OpChoice} and a profile's layer_rules;
    on_step(step, weights) after every optimiser step (and step 0, the initial weights)."""

# Present only where fplab was built with CUDA (python/src/cuda.cpp; fplab.torch's CUDA tensors).
# Addresses are device pointers (torch.Tensor.data_ptr()) to dense row-major float32 memory.
def cuda_device(device: int = 0) -> str: ...
def cuda_why_not(gemm: bool, schedule: Schedule, arithmetic: Arithmetic, device: int = 0) -> str: ...
def cuda_matmul(a: int, b: int, c: int, m: int, n: int, k: int, schedule: Schedule, device: int = 0,
                impl_seed: int = 0, op_id: int = 0, call: int = 0, rounded_products: bool = False) -> None: ...
def cuda_batch_norm_cudnn_forward(x: int, y: int, centred: int, stats: int, shape: Tuple[int, int, int], weight: int,
                                  bias: int, running_mean: int, running_var: int, momentum: float, eps: float,
                                  schedule: Schedule, device: int, impl_seed: int, op_id: int, call: int) -> None: ...
def cuda_batch_norm_cudnn_backward(gy: int, centred: int, inv_std: int, weight: int, grads: int, dx: int,
                                   shape: Tuple[int, int, int], schedule: Schedule, device: int, impl_seed: int,
                                   op_id: int, call: int) -> None: ...
def cuda_conv2d_direct_dgrad(gy: int, weight: int, dx: int, shape: Tuple[int, int, int, int], out_channels: int,
                             kernel: int, stride: int, padding: int, dgrad: Schedule, slab_images: int, device: int,
                             impl_seed: int, op_id: int, call: int) -> None: ...
def cuda_batch_norm_nchw_forward(x: int, weight: int, bias: int, stats: int, y: int, shape: Tuple[int, int, int],
                                 eps: float, device: int, running_mean: int = 0, running_var: int = 0,
                                 momentum: float = 0.1) -> None: ...
def cuda_batch_norm_nchw_backward(gy: int, x: int, mean: int, inv_std: int, weight: int, grads: int, dx: int,
                                  shape: Tuple[int, int, int], device: int) -> None: ...
def cuda_channel_fma(x: int, scale: int, addend: int, addend_per_element: bool, shape: Tuple[int, int, int], out: int,
                     device: int = 0) -> None: ...
def cuda_dot_why_not(schedule: Schedule, arithmetic: Arithmetic, n: int) -> str: ...
def cuda_dot_planes(a: int, b: int, shape: Tuple[int, int, int], out: int, schedule: Schedule,
                    device: int = 0) -> None: ...
def cuda_sum_segments(x: int, n: int, count: int, out: int, schedule: Schedule, device: int = 0, impl_seed: int = 0,
                      op_id: int = 0, call: int = 0) -> None: ...
def cuda_sum_columns(x: int, rows: int, cols: int, out: int, schedule: Schedule, device: int = 0, impl_seed: int = 0,
                     op_id: int = 0, call: int = 0) -> None: ...
def cuda_batch_norm_forward(x: int, xhat: int, y: int, stats: int, segments: int, shape: Tuple[int, int, int],
                            weight: int, bias: int, running_mean: int, running_var: int, training: bool,
                            momentum: float, eps: float, schedule: Schedule, device: int, impl_seed: int,
                            op_ids: Tuple[int, int], call: int) -> None: ...
def cuda_batch_norm_backward(gy: int, xhat: int, inv_std: int, weight: int, grads: int, segments: int,
                             segments_floats: int, dx: int, shape: Tuple[int, int, int], training: bool,
                             schedule: Schedule, device: int,
                             impl_seed: int, op_ids: Tuple[int, int], call: int) -> None: ...
def cuda_conv2d_forward(x: int, weight: int, bias: int, y: int, cols: int, shape: Tuple[int, int, int, int],
                        out_channels: int, kernel: int, stride: int, padding: int, schedule: Schedule,
                        device: int, impl_seed: int = 0, op_id: int = 0, call: int = 0) -> None: ...
def cuda_conv2d_backward(x: int, weight: int, gy: int, cols: int, gw: int, gb: int, dx: int,
                         shape: Tuple[int, int, int, int], out_channels: int, kernel: int, stride: int, padding: int,
                         wgrad: Schedule, dgrad: Schedule, bias_grad: Schedule, device: int, impl_seed: int,
                         wgrad_op_id: int, bias_op_id: int, dgrad_op_id: int, call: int) -> None: ...
def cuda_im2col(x: int, cols: int, shape: Tuple[int, int, int, int], kernel: int, stride: int, padding: int,
                transposed: bool = False, device: int = 0) -> None: ...
def cuda_col2im(dcols: int, dx: int, shape: Tuple[int, int, int, int], kernel: int, stride: int, padding: int,
                device: int = 0) -> None: ...
def cuda_workspace_bytes() -> int: ...
def cuda_synchronize(device: int = 0) -> None: ...

class ReplicaRecord:
    """One trained replica's results (experiments::ReplicaRecord); the SHA-256s are computed from the
    arrays as fplab run computes them."""

    def __init__(
        self,
        profile: str,
        variant: str,
        replica: int,
        algo_seed: int,
        impl_seed: int,
        test_accuracy: float,
        train_loss: float,
        seconds: float,
        predictions: ArrayLike,
        weights: ArrayLike,
        buffers: ArrayLike,
    ) -> None: ...
    @property
    def profile(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def replica(self) -> int: ...
    @property
    def algo_seed(self) -> int: ...
    @property
    def impl_seed(self) -> int: ...
    @property
    def test_accuracy(self) -> float: ...
    @property
    def train_loss(self) -> float: ...
    @property
    def seconds(self) -> float: ...
    @property
    def weights_sha256(self) -> str: ...
    @property
    def predictions_sha256(self) -> str: ...
    @property
    def predictions(self) -> np.ndarray: ...
    @property
    def weights(self) -> np.ndarray: ...
    @property
    def buffers(self) -> np.ndarray: ...

def reveal_sum(fn: Callable[[Any], Any], n: int, verify: int = 0, seed: int = 1, runs: int = 0, *,
               seconds: float = 0.0) -> Dict[str, Any]:
    """The addition order of fn (a float32 array of n in, a float out), found by probing it."""

def reveal_dot(fn: Callable[[Any, Any], Any], n: int, verify: int = 0, seed: int = 1, runs: int = 0, *,
               seconds: float = 0.0) -> Dict[str, Any]:
    """The addition order of fn (two float32 arrays of n in, their dot product out), probed with b = 1."""

def name_tree(nodes: List[List[int]], n: int) -> List[str]:
    """The schedules that give a tree of n terms (node j, id n + j, lists its children)."""

def render_gnuplot(path: str, script: str, data: str, width: int = 900, height: int = 480) -> None:
    """Renders ``script`` (after ``set terminal``/``set output``; its data is 'data.dat') to ``path``
    (.png, .svg or .pdf), written whole or not at all, gnuplot started without a shell."""

def gnuplot_quoted(text: str) -> str:
    """``text`` as a gnuplot single-quoted string literal."""

def write_file_atomically(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` whole or not at all (a temporary file beside it, renamed over it)."""

def paired_t_interval(differences: Sequence[float], level: float = 0.95) -> Tuple[float, float, float]:
    """(mean, low, high): the mean of paired differences (one per unit, e.g. per algo seed) and its
    Student-t interval at ``level``; fplab.Error with fewer than two or a non-finite one."""

def load_experiment_file(path: str) -> str:
    """An experiment TOML file read and checked as fplab run reads it, as JSON text: name,
    description, data, model, training and run, every default filled in."""

NATIVE_PROFILE: str  # "native": replicas of PyTorch's own kernels in fplab.torch.experiment

class Experiment:
    """An experiment of fplab.torch.experiment(): the recipe checked as fplab run checks a TOML file,
    and its replica jobs (fplab run's seeds and schedule modes per variant)."""

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        source: str = "",
        model: str = "",
        epochs: int = 1,
        batch: int = 64,
        optimizer: str = "adam",
        lr: float = 0.001,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        lr_decay_every: int = 0,
        lr_decay_factor: float = 0.1,
        profiles: Sequence[str],
        variants: Sequence[str],
        replicas: int = 5,
        algo_seed: int = 1,
        impl_seed: int = 1,
        profiles_dir: Sequence[str] = ...,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def default_out(self) -> str:
        """results/ and the name made a safe file name, as fplab run's default --out."""
    def jobs(self) -> List[Dict[str, Any]]:
        """Every replica in fplab run's order: profile, variant, replica, algo_seed, impl_seed,
        order_seed (0: the algo seed), flip_weight (-1: none), deterministic."""
    def load_replica(self, out_dir: str, job: int, source: str) -> Optional[ReplicaRecord]:
        """Job `job`'s record from out_dir/replicas/ if trained with this recipe and `source`; else None."""
    def save_replica(self, out_dir: str, job: int, record: ReplicaRecord, source: str) -> None:
        """Writes job `job`'s record atomically into out_dir/replicas/."""
    def write_results(
        self,
        records: Sequence[ReplicaRecord],
        test_labels: ArrayLike,
        class_names: Sequence[str],
        out_dir: str,
        command: str,
    ) -> Dict[str, str]:
        """experiments::summarize and write_results: every file fplab run writes. Returns
        {'summary': summary.json's text, 'table': the terminal table}."""

class OutputFolder:
    """An output folder claimed for one run (experiments::OutputFolder): locked until release()."""

    def __init__(self, path: str, name: str, *, resume: bool = False, force: bool = False) -> None: ...
    @property
    def leftovers_removed(self) -> int: ...
    def release(self) -> None: ...

// conv2d and its backward ops in float32 through oneDNN (conv_onednn.h).
//
// Each op and geometry gets a Schedule, built once and cached for the process. It runs the batch in chunks of
// images, each chunk through a Plan: oneDNN's convolution primitive for that many images (direct algorithm;
// oneDNN picks the implementation, JIT-compiled for this CPU) and the reorders between the runtime's plain
// NCHW / OIHW buffers and the layouts the primitive computes in. A call takes one scratch region (oneDNN's
// scratchpad, the reordered operands of one chunk, and for the weight gradient of several chunks the chunk's
// plain gradient), then for each chunk in order runs the reorders in, the convolution and the reorder out on
// this thread's stream. The weight gradient sums the chunks' gradients in chunk order.
//
// Layouts (measured on ResNet-32's layers: docs/results/kernels.md): a convolution with a spatial kernel
// computes in oneDNN's blocked layouts (format_tag::any: nChw8c on AVX2), its activations reordered chunk by
// chunk; a 1x1 kernel computes in the plain layouts (oneDNN's GEMM convolution, one chunk: it needs no column
// matrix), where the reorders would cost more than the blocked layouts save. DTR_ONEDNN_CONV_LAYOUT=plain or
// blocked forces one for every geometry (to measure them); auto, the default, is the rule above.
#include "kernels/dense/conv_onednn.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dtr/check.h"
#include "kernels/dense/onednn.h"

namespace dtr::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

enum class Layout : std::uint8_t { plain, blocked };

// A chunk's reordered activations take at most the im2col path's column matrix (one image-group's
// [C/groups·KH·KW, OH·OW]), so that the scratch under the budget stays near what it was; but a call makes at
// most this many chunks: each costs its OpenMP regions (a reorder in and out, the convolution), and on a
// machine whose cores other programs also want, a region can wait a scheduler tick for its second thread.
constexpr std::int64_t kMaxChunks = 4;

// A spatial convolution with fewer channels in or out per group stays on the im2col path
// (onednn_conv_applies): the blocked layouts would pad its channels to the vector width (8 floats on AVX2),
// and oneDNN's convolution in the plain layouts keeps a column matrix per thread, twice the im2col path's
// scratch on 2 cores.
constexpr std::int64_t kFewChannels = 8;

// DTR_ONEDNN_CONV_LAYOUT, read once: nullopt for auto.
std::optional<Layout> forced_layout() {
  static const std::optional<Layout> forced = []() -> std::optional<Layout> {
    const char* text = std::getenv("DTR_ONEDNN_CONV_LAYOUT");  // NOLINT(concurrency-mt-unsafe): read once
    if (text == nullptr || std::string(text) == "auto") return std::nullopt;
    if (std::string(text) == "plain") return Layout::plain;
    if (std::string(text) == "blocked") return Layout::blocked;
    DTR_THROW(ConfigError, "DTR_ONEDNN_CONV_LAYOUT=\"", text,
              "\" is not a convolution layout; expected auto, plain or blocked");
  }();
  return forced;
}

Layout layout_for(const ConvGeometry& g) {
  if (const std::optional<Layout> forced = forced_layout()) return *forced;
  return g.kh * g.kw > 1 ? Layout::blocked : Layout::plain;
}

// One tensor of a call as the primitive sees it.
struct Operand {
  int arg = 0;                     // DNNL_ARG_SRC, ...
  bool output = false;             // the op's output (written), else its input of the same index (read)
  std::int64_t image_elements = 0;  // per image, for an activation (chunked); 0 for the weights and the bias
  memory::desc user;               // the runtime's buffer (for the chunk): NCHW, OIHW (GOIHW with groups), [O]
  memory::desc inner;              // what the primitive reads or writes
  std::optional<dnnl::reorder> reorder;  // user -> inner (input) or inner -> user (output); none when equal
  memory::desc reorder_scratchpad;
};

// The primitive for a chunk of some number of images, with its operands in the order of the op's inputs, then
// its output.
struct Plan {
  dnnl::primitive primitive;
  memory::desc scratchpad;
  std::vector<Operand> operands;
};

struct Schedule {
  std::int64_t chunk = 0;               // images per chunk
  std::int64_t chunks = 0;              // chunks in all; the last is `tail` when set
  std::shared_ptr<const Plan> main, tail;
  std::vector<std::size_t> inner_offset;  // per operand: its reordered buffer in the call's scratch
  std::size_t partial_offset = 0;         // the weight gradient of a chunk after the first (plain)
  std::size_t bytes = 0;                  // the call's scratch; the scratchpads share its start
};

ConvGeometry with_images(ConvGeometry g, std::int64_t n) {
  g.n = n;
  return g;
}

memory::desc activation(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, bool plain) {
  return memory::desc({n, c, h, w}, memory::data_type::f32, plain ? Tag::nchw : Tag::any);
}

// [O, C/groups, KH, KW], as [groups, O/groups, C/groups, KH, KW] with groups: the same bytes.
memory::desc weights(const ConvGeometry& g, bool plain) {
  if (g.groups == 1) {
    return memory::desc({g.o, g.c, g.kh, g.kw}, memory::data_type::f32, plain ? Tag::oihw : Tag::any);
  }
  return memory::desc({g.groups, g.outputs_per_group(), g.channels_per_group(), g.kh, g.kw},
                      memory::data_type::f32, plain ? Tag::goihw : Tag::any);
}

struct Descs {
  memory::desc x, w, y;  // what the descriptors are built with: plain, or any (oneDNN's choice)
  memory::dims strides, dilates, padding;
};

Descs descs(const ConvGeometry& g, bool plain) {
  // oneDNN counts dilation from 0 (no gaps); the padding is symmetric (the bottom and right as the top and left).
  return Descs{activation(g.n, g.c, g.h, g.w, plain), weights(g, plain), activation(g.n, g.o, g.oh, g.ow, plain),
               memory::dims{g.stride_h, g.stride_w}, memory::dims{g.dil_h - 1, g.dil_w - 1},
               memory::dims{g.pad_h, g.pad_w}};
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::convolution_forward::primitive_desc forward_pd(const ConvGeometry& g, const Descs& d, bool bias) {
  const auto algorithm = dnnl::algorithm::convolution_direct;
  const auto prop = dnnl::prop_kind::forward_training;
  const dnnl::convolution_forward::desc desc =
      bias ? dnnl::convolution_forward::desc(prop, algorithm, d.x, d.w,
                                             memory::desc({g.o}, memory::data_type::f32, Tag::x), d.y, d.strides,
                                             d.dilates, d.padding, d.padding)
           : dnnl::convolution_forward::desc(prop, algorithm, d.x, d.w, d.y, d.strides, d.dilates, d.padding,
                                             d.padding);
  return dnnl::convolution_forward::primitive_desc(desc, user_scratchpad(), onednn::engine());
}

// The operand `arg` whose buffer the runtime holds as `user` and the primitive uses as `inner`.
Operand operand(int arg, bool output, std::int64_t image_elements, const memory::desc& user,
                const memory::desc& inner) {
  Operand op;
  op.arg = arg;
  op.output = output;
  op.image_elements = image_elements;
  op.user = user;
  op.inner = inner;
  if (user != inner) {
    const dnnl::engine& e = onednn::engine();
    const memory::desc& from = output ? inner : user;
    const memory::desc& to = output ? user : inner;
    const dnnl::reorder::primitive_desc pd(e, from, e, to, user_scratchpad());
    op.reorder = dnnl::reorder(pd);
    op.reorder_scratchpad = pd.scratchpad_desc();
  }
  return op;
}

// The plan of `op` on `g` (g.n images).
std::shared_ptr<const Plan> build_plan(ConvOp op, const ConvGeometry& g, bool bias, Layout layout) {
  const Descs d = descs(g, layout == Layout::plain);
  const Descs plain = descs(g, true);
  const std::int64_t x_image = g.c * g.h * g.w;
  const std::int64_t y_image = g.o * g.oh * g.ow;
  auto plan = std::make_shared<Plan>();
  const dnnl::convolution_forward::primitive_desc fwd = forward_pd(g, d, bias);
  auto& ops = plan->operands;
  switch (op) {
    case ConvOp::forward:
      plan->primitive = dnnl::convolution_forward(fwd);
      plan->scratchpad = fwd.scratchpad_desc();
      ops.push_back(operand(DNNL_ARG_SRC, false, x_image, plain.x, fwd.src_desc()));
      ops.push_back(operand(DNNL_ARG_WEIGHTS, false, 0, plain.w, fwd.weights_desc()));
      if (bias) ops.push_back(operand(DNNL_ARG_BIAS, false, 0, fwd.bias_desc(), fwd.bias_desc()));
      ops.push_back(operand(DNNL_ARG_DST, true, y_image, plain.y, fwd.dst_desc()));
      break;
    case ConvOp::backward_input: {
      const dnnl::convolution_backward_data::primitive_desc bwd(
          dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, d.x, d.w, d.y, d.strides,
                                                d.dilates, d.padding, d.padding),
          user_scratchpad(), onednn::engine(), fwd);
      plan->primitive = dnnl::convolution_backward_data(bwd);
      plan->scratchpad = bwd.scratchpad_desc();
      ops.push_back(operand(DNNL_ARG_DIFF_DST, false, y_image, plain.y, bwd.diff_dst_desc()));
      ops.push_back(operand(DNNL_ARG_WEIGHTS, false, 0, plain.w, bwd.weights_desc()));
      ops.push_back(operand(DNNL_ARG_DIFF_SRC, true, x_image, plain.x, bwd.diff_src_desc()));
      break;
    }
    case ConvOp::backward_weight: {
      const dnnl::convolution_backward_weights::primitive_desc bwd(
          dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d.x, d.w, d.y, d.strides,
                                                   d.dilates, d.padding, d.padding),
          user_scratchpad(), onednn::engine(), fwd);
      plan->primitive = dnnl::convolution_backward_weights(bwd);
      plan->scratchpad = bwd.scratchpad_desc();
      ops.push_back(operand(DNNL_ARG_DIFF_DST, false, y_image, plain.y, bwd.diff_dst_desc()));
      ops.push_back(operand(DNNL_ARG_SRC, false, x_image, plain.x, bwd.src_desc()));
      ops.push_back(operand(DNNL_ARG_DIFF_WEIGHTS, true, 0, plain.w, bwd.diff_weights_desc()));
      break;
    }
  }
  return plan;
}

// The bytes of a plan's reordered activations (what grows with the chunk).
std::size_t reordered_activation_bytes(const Plan& plan) {
  std::size_t bytes = 0;
  for (const Operand& o : plan.operands) {
    if (o.reorder && o.image_elements > 0) bytes += onednn::aligned(o.inner.get_size());
  }
  return bytes;
}

std::shared_ptr<const Schedule> build_schedule(ConvOp op, const ConvGeometry& g, bool bias) {
  const Layout layout = layout_for(g);
  auto s = std::make_shared<Schedule>();
  s->chunk = g.n;
  if (layout == Layout::blocked && g.n > 1) {
    // The chunk: as many images as keep the reordered activations within the limit, at least one.
    std::shared_ptr<const Plan> one = build_plan(op, with_images(g, 1), bias, layout);
    const std::size_t columns = sizeof(float) * static_cast<std::size_t>(g.patch() * g.positions());
    const std::size_t per_image = std::max<std::size_t>(reordered_activation_bytes(*one), 1);
    const auto within_columns = static_cast<std::int64_t>(columns / per_image);
    s->chunk = std::clamp<std::int64_t>(std::max(within_columns, (g.n + kMaxChunks - 1) / kMaxChunks), 1, g.n);
    if (s->chunk == 1) s->main = one;
    if (const std::int64_t rest = g.n % s->chunk; rest > 0) {
      s->tail = rest == 1 ? one : build_plan(op, with_images(g, rest), bias, layout);
    }
  }
  if (!s->main) s->main = build_plan(op, with_images(g, s->chunk), bias, layout);
  s->chunks = (g.n + s->chunk - 1) / s->chunk;
  // The scratch: one scratchpad region for every primitive (they run one after another), then each reordered
  // operand (the larger of main's and tail's), then a chunk's weight gradient.
  std::size_t scratchpad = 0;
  for (const Plan* plan : {s->main.get(), s->tail.get()}) {
    if (plan == nullptr) continue;
    scratchpad = std::max(scratchpad, plan->scratchpad.get_size());
    for (const Operand& o : plan->operands) scratchpad = std::max(scratchpad, o.reorder_scratchpad.get_size());
  }
  s->bytes = onednn::aligned(scratchpad);
  for (std::size_t i = 0; i < s->main->operands.size(); ++i) {
    std::size_t inner = 0;
    for (const Plan* plan : {s->main.get(), s->tail.get()}) {
      if (plan != nullptr && plan->operands[i].reorder) inner = std::max(inner, plan->operands[i].inner.get_size());
    }
    s->inner_offset.push_back(s->bytes);
    s->bytes += onednn::aligned(inner);
  }
  if (op == ConvOp::backward_weight && s->chunks > 1) {
    s->partial_offset = s->bytes;
    s->bytes += onednn::aligned(sizeof(float) * static_cast<std::size_t>(g.weight_numel()));
  }
  return s;
}

// ---- the cache ----------------------------------------------------------------------------------------------

// The op, the bias flag and every number of the geometry.
using Key = std::array<std::int64_t, 16>;

Key key_of(ConvOp op, const ConvGeometry& g, bool bias) {
  return Key{static_cast<std::int64_t>(op), bias ? 1 : 0, g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.groups,
             g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w};
}

// A program that convolves ever new shapes would otherwise keep their JIT code for ever: past this many
// schedules the cache starts again (schedules in use live on in their callers).
constexpr std::size_t kCacheCapacity = 1024;

struct Cache {
  std::mutex mutex;
  std::map<Key, std::shared_ptr<const Schedule>> schedules;
};

Cache& cache() {
  static Cache* const all = new Cache;  // leaked: primitives must not be destroyed after oneDNN's statics
  return *all;
}

std::string geometry_words(const ConvGeometry& g) {
  return "stride " + to_string(Shape{g.stride_h, g.stride_w}) + ", padding " + to_string(Shape{g.pad_h, g.pad_w}) +
         ", dilation " + to_string(Shape{g.dil_h, g.dil_w}) + ", groups " + std::to_string(g.groups);
}

// The schedule of `op` on `g`, built on first use. The build (oneDNN's JIT) runs outside the lock; of two
// threads that build the same schedule at once, the first to finish is kept (both compute the same bits).
std::shared_ptr<const Schedule> schedule_for(ConvOp op, const ConvGeometry& g, bool bias,
                                             std::span<const TensorMeta> inputs) {
  const Key key = key_of(op, g, bias);
  Cache& c = cache();
  {
    const std::lock_guard<std::mutex> lock(c.mutex);
    if (const auto found = c.schedules.find(key); found != c.schedules.end()) return found->second;
  }
  std::shared_ptr<const Schedule> schedule;
  try {
    schedule = build_schedule(op, g, bias);
  } catch (const dnnl::error& e) {
    throw_onednn_conv_error(op, inputs, g, e.what(), static_cast<int>(e.status));
  }
  const std::lock_guard<std::mutex> lock(c.mutex);
  if (c.schedules.size() >= kCacheCapacity) c.schedules.clear();
  return c.schedules.try_emplace(key, std::move(schedule)).first->second;
}

dnnl::memory wrap(const memory::desc& md, const void* data) {
  return dnnl::memory(md, onednn::engine(), const_cast<void*>(data));
}

// A primitive's arguments: `args` and, when it needs one, its scratchpad (at the start of the call's scratch).
std::unordered_map<int, dnnl::memory> with_scratchpad(std::unordered_map<int, dnnl::memory> args,
                                                       const memory::desc& scratchpad, const onednn::Scratch& scratch) {
  if (scratchpad.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, wrap(scratchpad, scratch.at(0)));
  return args;
}

void run(ConvOp op, const Schedule& s, const KernelArgs& args) {
  // Outside the caller's try: no scratch within the budget is the runtime's OutOfMemory, not a oneDNN error.
  const onednn::Scratch scratch(args.workspace, s.bytes);
  dnnl::stream& stream = onednn::stream();
  float* const gradient = op == ConvOp::backward_weight ? args.output<float>(0) : nullptr;
  auto* const partial = reinterpret_cast<float*>(scratch.at(s.partial_offset));
  const Plan* previous = nullptr;
  for (std::int64_t chunk = 0; chunk < s.chunks; ++chunk) {
    const Plan& plan = chunk + 1 == s.chunks && s.tail ? *s.tail : *s.main;
    const std::int64_t first_image = chunk * s.chunk;
    std::unordered_map<int, dnnl::memory> conv_args;
    std::optional<std::pair<dnnl::memory, dnnl::memory>> write_back;  // (inner, user) of a reordered output
    for (std::size_t i = 0; i < plan.operands.size(); ++i) {
      const Operand& o = plan.operands[i];
      auto* data = static_cast<float*>(o.output ? args.outputs[0] : const_cast<void*>(args.inputs[i]));
      data += first_image * o.image_elements;
      if (gradient != nullptr && o.output && chunk > 0) data = partial;  // summed into the gradient below
      const dnnl::memory user = wrap(o.user, data);
      if (!o.reorder) {
        conv_args.emplace(o.arg, user);
        continue;
      }
      const dnnl::memory inner = wrap(o.inner, scratch.at(s.inner_offset[i]));
      conv_args.emplace(o.arg, inner);
      if (o.output) {
        write_back.emplace(inner, user);
      } else if (o.image_elements > 0 || &plan != previous) {  // the weights: once per plan
        o.reorder->execute(stream, with_scratchpad({{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, inner}},
                                                   o.reorder_scratchpad, scratch));
      }
    }
    plan.primitive.execute(stream, with_scratchpad(std::move(conv_args), plan.scratchpad, scratch));
    if (write_back) {
      const Operand& o = plan.operands.back();
      const auto& [inner, user] = *write_back;
      o.reorder->execute(stream,
                         with_scratchpad({{DNNL_ARG_FROM, inner}, {DNNL_ARG_TO, user}}, o.reorder_scratchpad, scratch));
    }
    stream.wait();
    if (gradient != nullptr && chunk > 0) {
      const std::size_t count = plan.operands.back().user.get_size() / sizeof(float);
      for (std::size_t e = 0; e < count; ++e) gradient[e] += partial[e];
    }
    previous = &plan;
  }
}

}  // namespace

const char* conv_op_name(ConvOp op) {
  switch (op) {
    case ConvOp::forward:
      return "conv2d";
    case ConvOp::backward_input:
      return "conv2d_backward_input";
    case ConvOp::backward_weight:
      return "conv2d_backward_weight";
  }
  return "conv2d";
}

bool onednn_conv_applies(const ConvGeometry& g) {
  const bool empty = g.n == 0 || g.c == 0 || g.o == 0 || g.h == 0 || g.w == 0 || g.oh == 0 || g.ow == 0;
  const bool few_channels = g.channels_per_group() < kFewChannels || g.outputs_per_group() < kFewChannels;
  return !empty && (g.kh * g.kw == 1 || !few_channels);
}

void onednn_conv(ConvOp op, const ConvGeometry& g, const KernelArgs& args) {
  const bool bias = op == ConvOp::forward && args.inputs.size() == 3;
  const std::shared_ptr<const Schedule> schedule = schedule_for(op, g, bias, args.input_meta);
  try {
    run(op, *schedule, args);
  } catch (const dnnl::error& e) {
    throw_onednn_conv_error(op, args.input_meta, g, e.what(), static_cast<int>(e.status));
  }
}

std::size_t onednn_conv_scratch_bytes(ConvOp op, const ConvGeometry& g, bool bias) {
  const Schedule& s = *schedule_for(op, g, bias, {});
  return s.bytes == 0 ? 0 : s.bytes + onednn::kAlignment;
}

void throw_onednn_conv_error(ConvOp op, std::span<const TensorMeta> inputs, const ConvGeometry& g,
                             std::string_view what, int status) {
  onednn::throw_error(conv_op_name(op), inputs, geometry_words(g), what, status);
}

std::size_t onednn_conv_cache_size() {
  Cache& c = cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  return c.schedules.size();
}

}  // namespace dtr::kernels

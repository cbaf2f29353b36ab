// Generation and the text form of differential programs (program.h).
#include "program.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "dtr/check.h"
#include "dtr/error.h"

namespace dtr::differential {
namespace {

struct Spec {
  OpKind kind;
  const char* name;
  int operands;
  int sizes;
  int weight;  // how often the generator picks it
};

// Operand and size counts fix the text form; weights the generator's mix.
constexpr std::array<Spec, 24> kSpecs{{
    {OpKind::parameter, "parameter", 0, 2, 2},
    {OpKind::input, "input", 0, 2, 2},
    {OpKind::add, "add", 2, 0, 8},
    {OpKind::sub, "sub", 2, 0, 4},
    {OpKind::mul, "mul", 2, 0, 7},
    {OpKind::relu, "relu", 1, 0, 6},
    {OpKind::tanh, "tanh", 1, 0, 4},
    {OpKind::gelu, "gelu", 1, 0, 3},
    {OpKind::scale, "scale", 1, 0, 4},
    {OpKind::matmul, "matmul", 2, 0, 10},
    {OpKind::sum_rows, "sum_rows", 1, 0, 3},
    {OpKind::dropout, "dropout", 1, 0, 5},
    {OpKind::split, "split", 1, 1, 5},
    {OpKind::concat, "concat", 2, 0, 4},
    {OpKind::transpose, "transpose", 1, 0, 3},
    {OpKind::flatten, "flatten", 1, 0, 3},
    {OpKind::uniform, "uniform", 1, 0, 3},
    {OpKind::view_rows, "view_rows", 1, 1, 4},
    {OpKind::assign, "assign", 2, 0, 6},
    {OpKind::evict, "evict", 1, 0, 3},
    {OpKind::drop, "drop", 1, 0, 5},
    {OpKind::read, "read", 1, 0, 6},
    {OpKind::backward, "backward", 1, 0, 4},
    {OpKind::step, "step", 0, 0, 3},
}};

const Spec& spec(OpKind kind) { return kSpecs.at(static_cast<std::size_t>(kind)); }

class RandomChoices {
 public:
  explicit RandomChoices(std::uint64_t seed) : rng_(seed) {}
  std::uint64_t below(std::uint64_t n) { return rng_() % n; }

 private:
  std::mt19937_64 rng_;
};

// Reads each choice from the fuzzer's bytes (two bytes where more than 256 values are possible).
class ByteChoices {
 public:
  explicit ByteChoices(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::uint64_t below(std::uint64_t n) {
    std::uint64_t value = next();
    if (n > 256) value = value << 8 | next();
    return value % n;
  }
  bool exhausted() const { return position_ >= bytes_.size(); }

 private:
  std::uint64_t next() { return position_ < bytes_.size() ? bytes_[position_++] : 0; }
  std::span<const std::uint8_t> bytes_;
  std::size_t position_ = 0;
};

// The body repeated as training steps (GeneratorOptions::steps): its parameters made once, first; then every
// step runs the body's other instructions on values of its own (ids shifted by `ids`, the body's count, per
// step), and drops, but in the last step, whatever it made and still holds, as a training step lets its
// activations go. Each step then makes its values the same way as the step before, so the runtime's forecasts
// (which match values by how they were made) hold from the second or third step on.
Program repeat_as_steps(const Program& body, std::uint32_t ids, int steps) {
  Program program{body.seed, body.optimizer, {}};
  std::vector<std::uint32_t> parameters;
  for (const Instruction& in : body.instructions) {
    if (in.kind != OpKind::parameter) continue;
    program.instructions.push_back(in);
    parameters.push_back(in.out);
  }
  for (int step = 0; step < steps; ++step) {
    const std::uint32_t shift = ids * static_cast<std::uint32_t>(step);
    const auto moved = [&](std::uint32_t id) {
      return std::find(parameters.begin(), parameters.end(), id) != parameters.end() ? id : id + shift;
    };
    std::vector<std::uint32_t> held;  // made in this step and not dropped, in the order made
    for (Instruction in : body.instructions) {
      if (in.kind == OpKind::parameter) continue;
      const Spec& s = spec(in.kind);
      if (outputs_of(in.kind) > 0) in.out += shift;
      if (s.operands >= 1) in.a = moved(in.a);
      if (s.operands >= 2) in.b = moved(in.b);
      for (int i = 0; i < outputs_of(in.kind); ++i) held.push_back(in.out + static_cast<std::uint32_t>(i));
      if (in.kind == OpKind::drop) std::erase(held, in.a);
      program.instructions.push_back(in);
    }
    if (step + 1 == steps) break;
    for (const std::uint32_t id : held) program.instructions.push_back({OpKind::drop, 0, id});
  }
  return program;
}

struct ValueInfo {
  std::int64_t rows = 1;
  std::int64_t cols = 0;  // 0: one axis of `rows` elements
  bool grad = false;      // carries a gradient back to a parameter
  bool view = false;
  bool parameter = false;
};

template <class Choices>
class Builder {
 public:
  Builder(Choices& choices, const GeneratorOptions& options) : choices_(choices), options_(options) {}

  Program build(std::uint64_t seed) {
    program_.seed = seed;
    program_.optimizer = choices_.below(2) == 0 ? OptimizerKind::sgd : OptimizerKind::adam;
    for (int i = 0; i < 3; ++i) make_random_leaf(OpKind::parameter, /*may_be_vector=*/false);
    for (int i = 0; i < 2; ++i) make_random_leaf(OpKind::input, /*may_be_vector=*/false);
    int total_weight = 0;
    for (const Spec& s : kSpecs) total_weight += s.weight;
    while (static_cast<int>(program_.instructions.size()) < options_.length && !done()) {
      if (static_cast<int>(live_.size()) > options_.max_live) {
        if (const auto victim = pick([](const ValueInfo& v) { return !v.parameter; })) {
          emit({OpKind::drop, 0, *victim});
          live_.erase(*victim);
          continue;
        }
      }
      int roll = static_cast<int>(choices_.below(static_cast<std::uint64_t>(total_weight)));
      std::size_t k = 0;
      while (roll >= kSpecs[k].weight) roll -= kSpecs[k++].weight;
      add(kSpecs[k].kind);
    }
    if (options_.steps > 1) return repeat_as_steps(program_, next_, options_.steps);
    return std::move(program_);
  }

 private:
  bool done() {
    if constexpr (requires { choices_.exhausted(); }) return choices_.exhausted();
    return false;
  }
  std::int64_t dim() { return 1 + static_cast<std::int64_t>(choices_.below(static_cast<std::uint64_t>(options_.max_dim))); }

  template <class Predicate>
  std::optional<std::uint32_t> pick(Predicate predicate) {
    std::vector<std::uint32_t> candidates;
    for (const auto& [id, info] : live_) {
      if (predicate(info)) candidates.push_back(id);
    }
    if (candidates.empty()) return std::nullopt;
    return candidates[choices_.below(candidates.size())];
  }
  // Half the time an operand that carries a gradient, so that backward passes have something to reach.
  std::optional<std::uint32_t> pick_operand(bool (*fits)(const ValueInfo&)) {
    if (choices_.below(2) == 0) {
      if (auto id = pick([&](const ValueInfo& v) { return v.grad && fits(v); })) return id;
    }
    return pick(fits);
  }

  std::uint32_t emit(Instruction instruction) {
    instruction.out = outputs_of(instruction.kind) > 0 ? next_ : 0;
    next_ += static_cast<std::uint32_t>(outputs_of(instruction.kind));
    program_.instructions.push_back(instruction);
    return instruction.out;
  }
  std::uint32_t make_leaf(OpKind kind, std::int64_t rows, std::int64_t cols) {
    const std::uint32_t id = emit({kind, 0, 0, 0, rows, cols});
    live_[id] = ValueInfo{rows, cols, kind == OpKind::parameter, false, kind == OpKind::parameter};
    return id;
  }
  // A leaf of a random shape ([rows] a quarter of the time when it may be a vector). Each draw is a statement of
  // its own: a call's arguments are evaluated in an order the compiler picks (gcc right to left, clang left
  // to right), and a seed must be the same program whatever built it. Columns are drawn first, as gcc did.
  void make_random_leaf(OpKind kind, bool may_be_vector) {
    const std::int64_t cols = may_be_vector && choices_.below(4) == 0 ? 0 : dim();
    const std::int64_t rows = dim();
    make_leaf(kind, rows, cols);
  }
  // A live value shaped [rows, cols], made as a leaf (a parameter half the time) when none is live.
  std::uint32_t partner(std::int64_t rows, std::int64_t cols) {
    if (auto id = pick([&](const ValueInfo& v) { return v.rows == rows && v.cols == cols; })) return *id;
    return make_leaf(choices_.below(2) == 0 ? OpKind::parameter : OpKind::input, rows, cols);
  }
  void result(std::uint32_t id, std::int64_t rows, std::int64_t cols, bool grad, bool view = false) {
    live_[id] = ValueInfo{rows, cols, grad, view, false};
  }

  void add(OpKind kind) {
    static constexpr auto any = [](const ValueInfo&) { return true; };
    static constexpr auto matrix = [](const ValueInfo& v) { return v.cols > 0; };
    static constexpr auto tall = [](const ValueInfo& v) { return v.rows >= 2; };
    switch (kind) {
      case OpKind::parameter:
      case OpKind::input:
        make_random_leaf(kind, /*may_be_vector=*/true);
        return;
      case OpKind::add:
      case OpKind::sub:
      case OpKind::mul: {
        const std::uint32_t a = *pick_operand(any);
        const ValueInfo info = live_[a];
        const std::uint32_t b = partner(info.rows, info.cols);
        result(emit({kind, 0, a, b}), info.rows, info.cols, info.grad || live_[b].grad);
        return;
      }
      case OpKind::relu:
      case OpKind::tanh:
      case OpKind::gelu:
      case OpKind::scale:
      case OpKind::dropout: {
        std::uint32_t a = *pick_operand(any);
        const ValueInfo info = live_[a];
        // A chain (GeneratorOptions::max_chain): the op again on its own result, each inner value released once
        // read, as a forward pass keeps only a chain's end; the lineage keeps the rest, to evict and remake.
        const auto longest = static_cast<std::uint64_t>(options_.max_chain);
        const std::uint64_t run = longest > 1 ? 1 + choices_.below(longest) : 1;
        for (std::uint64_t i = 0; i < run; ++i) {
          const std::uint32_t out = emit({kind, 0, a});
          result(out, info.rows, info.cols, info.grad);
          if (i > 0) {
            emit({OpKind::drop, 0, a});
            live_.erase(a);
          }
          a = out;
        }
        return;
      }
      case OpKind::matmul: {
        const auto a = pick_operand(matrix);
        if (!a) return;
        const ValueInfo info = live_[*a];
        const std::uint32_t b = partner(info.cols, dim());
        result(emit({kind, 0, *a, b}), info.rows, live_[b].cols, info.grad || live_[b].grad);
        return;
      }
      case OpKind::sum_rows: {
        const auto a = pick_operand(matrix);
        if (!a) return;
        const ValueInfo info = live_[*a];
        result(emit({kind, 0, *a}), info.cols, 0, info.grad);
        return;
      }
      case OpKind::split: {
        const auto a = pick_operand(tall);
        if (!a) return;
        const ValueInfo info = live_[*a];
        const std::int64_t first = 1 + static_cast<std::int64_t>(choices_.below(static_cast<std::uint64_t>(info.rows - 1)));
        const std::uint32_t out = emit({kind, 0, *a, 0, first});
        result(out, first, info.cols, info.grad);
        result(out + 1, info.rows - first, info.cols, info.grad);
        return;
      }
      case OpKind::concat: {
        const std::uint32_t a = *pick_operand(any);
        const ValueInfo info = live_[a];
        const auto b = pick([&](const ValueInfo& v) { return v.cols == info.cols && v.rows + info.rows <= 64; });
        if (!b) return;
        result(emit({kind, 0, a, *b}), info.rows + live_[*b].rows, info.cols, info.grad || live_[*b].grad);
        return;
      }
      case OpKind::transpose: {
        const auto a = pick_operand(matrix);
        if (!a) return;
        const ValueInfo info = live_[*a];
        result(emit({kind, 0, *a}), info.cols, info.rows, info.grad);
        return;
      }
      case OpKind::flatten: {
        const auto a = pick_operand(matrix);
        if (!a) return;
        const ValueInfo info = live_[*a];
        result(emit({kind, 0, *a}), info.rows * info.cols, 0, info.grad);
        return;
      }
      case OpKind::uniform: {
        const std::uint32_t a = *pick(any);
        const ValueInfo info = live_[a];
        result(emit({kind, 0, a}), info.rows, info.cols, false);
        return;
      }
      case OpKind::view_rows: {
        const auto a = pick(tall);
        if (!a) return;
        const ValueInfo info = live_[*a];
        const std::int64_t first = static_cast<std::int64_t>(choices_.below(static_cast<std::uint64_t>(info.rows - 1)));
        result(emit({kind, 0, *a, 0, first}), info.rows - first, info.cols, false, true);
        return;
      }
      case OpKind::assign: {
        const auto a = pick([](const ValueInfo& v) { return !v.grad && !v.view; });
        if (!a) return;
        const ValueInfo info = live_[*a];
        emit({kind, 0, *a, partner(info.rows, info.cols)});
        return;
      }
      case OpKind::drop: {
        if (const auto a = pick([](const ValueInfo& v) { return !v.parameter; })) {
          emit({kind, 0, *a});
          live_.erase(*a);
        }
        return;
      }
      case OpKind::read:
      case OpKind::evict:
        emit({kind, 0, *pick(any)});
        return;
      case OpKind::backward: {
        auto a = pick([](const ValueInfo& v) { return v.grad && !v.parameter; });
        if (!a) {  // something to differentiate: a parameter times a value of its shape
          const std::uint32_t p = *pick([](const ValueInfo& v) { return v.parameter; });
          const ValueInfo info = live_[p];
          const std::uint32_t other = partner(info.rows, info.cols);
          a = emit({OpKind::mul, 0, p, other});
          result(*a, info.rows, info.cols, true);
        }
        emit({kind, 0, *a});
        // The graph is freed: what was computed from the parameters is a plain value from now on.
        for (auto& [id, info] : live_) info.grad = info.parameter;
        if (choices_.below(2) == 0) emit({OpKind::step});  // as training does, most of the time
        return;
      }
      case OpKind::step:
        emit({kind});
        return;
    }
  }

  Choices& choices_;
  const GeneratorOptions& options_;
  Program program_;
  std::map<std::uint32_t, ValueInfo> live_;  // ordered: the same choices give the same program everywhere
  std::uint32_t next_ = 0;
};

std::uint32_t parse_value(std::string_view token, const std::string& where) {
  std::uint32_t value = 0;
  const bool ok = token.size() > 1 && token[0] == 'v' &&
                  std::from_chars(token.data() + 1, token.data() + token.size(), value).ec == std::errc{} &&
                  std::from_chars(token.data() + 1, token.data() + token.size(), value).ptr ==
                      token.data() + token.size();
  DTR_CHECK(ok, InvalidArgument, where, ": expected a value such as v3, got '", token.substr(0, 40), "'");
  return value;
}

std::int64_t parse_size(std::string_view token, const std::string& where) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  DTR_CHECK(ec == std::errc{} && end == token.data() + token.size() && value >= 0 && value <= 4096,
            InvalidArgument, where, ": expected a size in [0, 4096], got '", token.substr(0, 40), "'");
  return value;
}

}  // namespace

int outputs_of(OpKind kind) {
  if (kind == OpKind::split) return 2;
  return kind <= OpKind::view_rows ? 1 : 0;
}

const char* to_string(OpKind kind) { return spec(kind).name; }

Program generate(std::uint64_t seed, const GeneratorOptions& options) {
  RandomChoices choices(seed);
  return Builder<RandomChoices>(choices, options).build(seed);
}

Program decode(std::span<const std::uint8_t> bytes, const GeneratorOptions& options) {
  ByteChoices choices(bytes);
  std::uint64_t seed = 0;
  for (int i = 0; i < 2; ++i) seed = seed << 8 | choices.below(256);
  return Builder<ByteChoices>(choices, options).build(seed);
}

std::string to_text(const Program& program) {
  std::ostringstream out;
  out << "# dtr differential program (fuzz/differential/program.h)\n";
  out << "seed " << program.seed << "\n";
  out << "optimizer " << (program.optimizer == OptimizerKind::sgd ? "sgd" : "adam") << "\n";
  for (const Instruction& in : program.instructions) {
    const Spec& s = spec(in.kind);
    for (int i = 0; i < outputs_of(in.kind); ++i) out << "v" << in.out + static_cast<std::uint32_t>(i) << " ";
    if (outputs_of(in.kind) > 0) out << "= ";
    out << s.name;
    if (s.operands >= 1) out << " v" << in.a;
    if (s.operands >= 2) out << " v" << in.b;
    if (s.sizes >= 1) out << " " << in.x;
    if (s.sizes >= 2) out << " " << in.y;
    out << "\n";
  }
  return out.str();
}

Program parse_program(std::string_view text, const std::string& source) {
  Program program;
  std::istringstream in{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = source + ":" + std::to_string(number);
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) tokens.push_back(word);
    if (tokens.empty()) continue;
    if (tokens[0] == "seed" || tokens[0] == "optimizer") {
      DTR_CHECK(tokens.size() == 2, InvalidArgument, where, ": expected '", tokens[0], " VALUE'");
      if (tokens[0] == "seed") {
        const auto [end, ec] = std::from_chars(tokens[1].data(), tokens[1].data() + tokens[1].size(), program.seed);
        DTR_CHECK(ec == std::errc{} && end == tokens[1].data() + tokens[1].size(), InvalidArgument, where,
                  ": the seed must be an unsigned integer");
      } else {
        DTR_CHECK(tokens[1] == "sgd" || tokens[1] == "adam", InvalidArgument, where,
                  ": the optimizer is sgd or adam, not '", tokens[1].substr(0, 40), "'");
        program.optimizer = tokens[1] == "sgd" ? OptimizerKind::sgd : OptimizerKind::adam;
      }
      continue;
    }
    std::size_t at = 0;
    std::vector<std::uint32_t> outs;
    if (const auto eq = std::find(tokens.begin(), tokens.end(), "="); eq != tokens.end()) {
      for (auto it = tokens.begin(); it != eq; ++it) outs.push_back(parse_value(*it, where));
      at = static_cast<std::size_t>(eq - tokens.begin()) + 1;
    }
    DTR_CHECK(at < tokens.size(), InvalidArgument, where, ": no instruction after '='");
    const Spec* found = nullptr;
    for (const Spec& s : kSpecs) {
      if (tokens[at] == s.name) found = &s;
    }
    DTR_CHECK(found != nullptr, InvalidArgument, where, ": unknown instruction '", tokens[at].substr(0, 40), "'");
    const int expected_outs = outputs_of(found->kind);
    DTR_CHECK(static_cast<int>(outs.size()) == expected_outs, InvalidArgument, where, ": ", found->name, " makes ",
              expected_outs, " value(s), the line names ", outs.size());
    for (std::size_t i = 1; i < outs.size(); ++i) {
      DTR_CHECK(outs[i] == outs[0] + i, InvalidArgument, where, ": the outputs must be consecutive values");
    }
    DTR_CHECK(tokens.size() - at - 1 == static_cast<std::size_t>(found->operands + found->sizes), InvalidArgument,
              where, ": ", found->name, " takes ", found->operands, " value(s) and ", found->sizes, " size(s)");
    Instruction instruction{found->kind, outs.empty() ? 0 : outs[0]};
    std::size_t next = at + 1;
    if (found->operands >= 1) instruction.a = parse_value(tokens[next++], where);
    if (found->operands >= 2) instruction.b = parse_value(tokens[next++], where);
    if (found->sizes >= 1) instruction.x = parse_size(tokens[next++], where);
    if (found->sizes >= 2) instruction.y = parse_size(tokens[next++], where);
    program.instructions.push_back(instruction);
  }
  return program;
}

}  // namespace dtr::differential

// dtr-sim's library: read a training trace (the DTR prototype's JSON-lines op log, which DTR_TRACE also
// writes) and replay it through the real Runtime over simulated memory, at any budget and heuristic (design
// section 6). One implementation of eviction serves real runs and simulations.
//
// Thread safety: a Trace is immutable once read and may be replayed from several threads at once; each
// replay builds its own runtime.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "dtr/config.h"

namespace dtr::sim {

// One instruction of a trace, after the START annotation. Tensor names are interned: indices into
// Trace::names. A CALL carries the MEMORY and ALIAS lines of its results.
struct Instruction {
  // make_constant: the named value becomes a constant (Runtime::make_constant), our extension of the format.
  enum class Kind : std::uint8_t { constant, call, mutate, copy, copy_from, make_constant, release, annotate };
  struct Result {
    std::uint32_t name = 0;
    std::uint64_t bytes = 0;
    std::int32_t alias = -1;  // -1: its own storage; k: the storage of argument k
  };

  Kind kind = Kind::call;
  std::uint32_t line = 0;   // in the file, from 1
  std::uint32_t name = 0;   // constant, make_constant, release: the tensor; copy, copy_from: DST
  std::uint32_t source = 0; // copy, copy_from: SRC
  std::uint64_t bytes = 0;  // constant: its MEMORY
  double time_ns = 0;       // call, mutate: TIME
  std::string op;           // call, mutate: the op's name; annotate: the annotation
  std::vector<std::uint32_t> args;     // call, mutate
  std::vector<Result> results;         // call
  std::vector<std::uint32_t> mutated;  // mutate: indices into args
};

struct Trace {
  std::string source;  // the file name, for messages
  std::vector<std::string> names;
  std::vector<Instruction> instructions;
  std::uint64_t calls = 0;  // CALL and MUTATE instructions
};

// Reads a trace. Lines before {"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"} are skipped (the prototype logs
// model setup there). Throws dtr::TraceError naming the file, the line and what was expected: a line that
// is not a JSON object, an unknown INSTRUCTION, a missing or malformed field, a CALL result without its
// MEMORY line, a MEMORY or ALIAS line that follows nothing it could belong to, or no START line at all. A path
// that cannot be read says which it is: no such file, not readable, a directory (with the OS's reason).
Trace read_trace(const std::string& path);
Trace parse_trace(std::istream& in, const std::string& source);

// The inverse of parse_trace: `trace` in the same JSON-lines format (a START annotation first; a CALL followed by
// MEMORY and ALIAS lines per result; numbers as strings, MUTATE indices as numbers, as the DTR authors' logs
// have them). The stream overload leaves checking `out` to the caller; the path overload throws dtr::IoError
// naming the file and the system's reason when it cannot be written (checked after the final flush).
// Throws dtr::InvalidArgument for an instruction naming a tensor outside trace.names.
void write_trace(const Trace& trace, std::ostream& out);
void write_trace(const Trace& trace, const std::string& path);

// What an unbudgeted replay needs and uses, counted as the DTR authors' simulator counts it (their reference
// for budget ratios): live bytes rise by every CONSTANT's and op output's size and fall when the last name
// of a storage is released (constants included); the peak is taken after each op's outputs are added.
struct TraceSummary {
  std::uint64_t peak_bytes = 0;
  double base_compute_ns = 0;       // the sum of CALL and MUTATE times
  std::uint64_t constant_bytes = 0; // the sum of CONSTANT sizes
  // A lower bound on every schedule's peak bytes (no budget below it is feasible, whatever evicts): the most
  // any one op needs at once, its inputs and outputs together with the constants resident then (which nothing
  // evicts). floor_bytes counts the constants the trace has not released (ReplayOptions::keep_constants
  // false); floor_bytes_constants_kept every constant defined so far (keep_constants true).
  std::uint64_t floor_bytes = 0;
  std::uint64_t floor_bytes_constants_kept = 0;
};
// Throws dtr::TraceError when the trace uses a name that is not live or its sizes sum past 2^64 bytes.
TraceSummary summarize(const Trace& trace);

struct ReplayOptions {
  std::optional<std::uint64_t> budget_bytes;  // nullopt: no budget; 0: infeasible (nothing fits)
  BudgetMode budget_mode = BudgetMode::bytes;
  std::string heuristic = "dtr-eq";
  EvictionSearch search = EvictionSearch::index;
  // The authors' runtime remade a closure's inputs in their order: a replay of their logs does too by default.
  RecomputeOrder recompute_order = RecomputeOrder::inputs;
  // The caching allocator's expandable segments (CachingAllocatorOptions::expandable_segments): what device
  // budgets count then is the large blocks' mapped pages, not whole segments.
  bool expandable_segments = false;
  // Stop, as "thrashing", as soon as recomputation makes the compute overhead pass this factor of the trace's
  // base compute (the runtime's Config::thrash_limit, checked at every recomputation, against the whole trace's
  // base compute as the DTR authors' simulator does: they stop at 2); nullopt: never stop. At least 1.
  std::optional<double> thrash_limit = 2.0;
  // Keep every CONSTANT resident to the end, released or not, as the authors' simulator pins them; false
  // frees a released constant once nothing needs it, as a real run does.
  bool keep_constants = true;
};

struct ReplayResult {
  bool feasible = true;    // false: dtr::OutOfMemory (no evictable storage could make room)
  bool thrashed = false;   // stopped: the overhead passed ReplayOptions::thrash_limit (dtr::Thrashing)
  std::string failure;     // when infeasible: the trace file and line, the logged op, the OutOfMemory message
  double base_compute_ns = 0;
  double remat_compute_ns = 0;
  std::uint64_t evictions = 0;
  std::uint64_t eager_evictions = 0;
  std::uint64_t rematerializations = 0;
  std::uint64_t search_ns = 0;            // wall time choosing what to evict and updating scores (RuntimeStats)
  std::uint64_t peak_resident_bytes = 0;  // sum of live storage bytes
  std::uint64_t peak_reserved_bytes = 0;  // the caching allocator's segments
  double peak_fragmentation = 0;          // the allocator's, 0..1
  std::uint64_t budget_bytes = 0;         // 0: none
  double overhead() const {
    return base_compute_ns > 0 ? (base_compute_ns + remat_compute_ns) / base_compute_ns : 1.0;
  }
};

// Replays `trace` through a Runtime over a SimulatedResource (no memory is touched; kernels do nothing and
// cost their logged TIME; the clock counts compute, recomputations included). At the end, every tensor
// still named is materialized: a run cannot win by never recomputing what the program still holds.
// A budget of 0 bytes is an infeasible result (feasible = false, failure says the budget rounds to 0 bytes)
// in both budget modes. Throws dtr::TraceError when the trace uses a name that is not live, or when its
// unbudgeted peak is beyond the simulated device (32 TiB).
ReplayResult replay(const Trace& trace, const ReplayOptions& options);

}  // namespace dtr::sim

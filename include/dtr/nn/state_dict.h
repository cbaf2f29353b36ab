// State dicts (PyTorch's state_dict / load_state_dict): a module's parameters and buffers by their dotted
// names (include/dtr/nn/module.h), saved to a file and read back bit for bit. The file format, its checks
// and its compatibility policy: docs/state-dict.md.
//
// Ownership: a StateDict holds tensor handles. state_dict() shares them with the module's variables (as in
// PyTorch, the dict follows later updates of the parameters); load_state_dict() copies the values, so the
// dict and the module never share a value afterwards. Thread safety: one thread at a time, as the runtime
// the tensors belong to.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dtr/nn/module.h"

namespace dtr::nn {

// Name → value, in order. Names are unique within a dict that is saved or loaded.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// The module's parameters, then its buffers, under Module's dotted names: the variables' data, not copies.
StateDict state_dict(const Module& module);

// Writes `dict` to `path`: into a temporary file beside it, renamed over `path` once complete and synced,
// so a failed save leaves whatever was at `path` as it was (a symbolic link there is replaced, not
// followed). Reads each tensor back to the host (recomputing it if it was evicted). dtr::InvalidArgument,
// before any file is made, for a dict that cannot be saved: an undefined tensor, an empty, repeated or
// over-4096-byte name, a rank over 8, a uint8 tensor. dtr::IoError naming the file and the operating
// system's reason when it cannot be written.
void save_state_dict(const StateDict& dict, const std::filesystem::path& path);

// Reads a file that save_state_dict wrote: the entries in the file's order, each a new constant of
// `runtime`. Nothing is allocated from a size the file gives before it is checked against the file's
// length. dtr::IoError naming the file, what is wrong and at which byte offset: a missing or unreadable
// file, a directory, another kind of file, an unsupported version, a truncation, a bad dtype code, an
// impossible size, an empty or repeated name, trailing bytes, a checksum mismatch.
StateDict read_state_dict(Runtime& runtime, const std::filesystem::path& path);

// Gives each of the module's parameters and buffers the value of its key in `dict`, copied as a constant
// of the variable's runtime. The variables are rebound (nn::Variable::rebind under nn::NoGrad): every copy
// of a variable sees the new value (an optimizer's too), a parameter stays a leaf that requires a gradient,
// and accumulated gradients are kept, as PyTorch keeps them. Everything is checked before anything
// changes: dtr::ShapeError naming each key whose dtype or shape differs, with the expected and the found,
// always; when `strict`, dtr::InvalidArgument listing the missing and the unexpected keys (otherwise they
// are skipped). dtr::InvalidArgument too for a repeated name, an undefined tensor or a uint8 value.
void load_state_dict(Module& module, const StateDict& dict, bool strict = true);

// save_state_dict(state_dict(module), path).
void save(const Module& module, const std::filesystem::path& path);
// read_state_dict into the runtime of the module's variables, then load_state_dict without its copy (the
// values read are the module's alone). A module without variables reads the file into a runtime of its own,
// to check it and its keys.
void load(Module& module, const std::filesystem::path& path, bool strict = true);

}  // namespace dtr::nn

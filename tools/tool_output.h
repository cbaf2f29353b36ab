// What dtr's programs share for their output files: a file written whole with every failure reported, a
// string quoted for gnuplot, gnuplot run without a shell, and stdout's write errors kept for the exit status.
//
// Thread safety: one thread at a time (run_gnuplot changes SIGPIPE's disposition while it runs).
#pragma once

#include <string>
#include <string_view>

namespace dtr::tools {

// Writes `contents` to `path`; every failure (open, write, close) throws std::runtime_error naming `option`,
// the file and the operating system's reason. A full disk often shows only at close, so that is checked too.
void write_file(const std::string& option, const std::string& path, const std::string& contents);

// `text` as a gnuplot string: single-quoted, the one place where gnuplot substitutes nothing (it runs
// `backquoted` commands everywhere else), ' doubled, and control characters, which would end the command
// line and start another, as spaces.
std::string gnuplot_quote(std::string_view text);

// Runs gnuplot, with no shell between, on `script` (its stdin) and returns its stdout: the image. Throws
// std::runtime_error (prefixed "--plot: ") when gnuplot is missing, fails, or writes nothing.
std::string run_gnuplot(const std::string& script);

// Whether `path` names a PNG (its extension is .png, in any case; else the plot is an SVG).
bool is_png(const std::string& path);
// Why --plot cannot write `path`, or "" when it can: the format follows the extension, .svg or .png (any case)
// or none (SVG); another (p.pdf) is refused rather than written as an SVG under that name. For CLI11's check().
std::string plot_path_error(const std::string& path);

// fflush(stdout), remembering why a write first failed; stdout_failure() is that reason ("" when none), for
// a program that must not exit 0 when its tables were lost (a full disk, a closed stdout).
void flush_stdout();
std::string stdout_failure();

}  // namespace dtr::tools

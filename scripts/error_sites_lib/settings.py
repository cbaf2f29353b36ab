"""What error_sites.py scans, and the limits of its matching."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
SOURCE_DIRS = ["common", "allocator", "heuristics", "kernels", "runtime", "nn", "sim", "train", "tools", "include",
               "dtr_torch"]
SOURCE_EXTS = (".cpp", ".h", ".cu", ".cuh")
SKIP_DIRS = {"tests", "bench", "fuzz", "build"}
TEST_DIR = "tests"
REGENERATE = "scripts/error_sites.py > docs/error-sites.md"

DTR_TYPES = ["Error", "InvalidArgument", "ConfigError", "ShapeError", "TraceError", "Thrashing", "IoError",
             "DeviceError", "OutOfMemory"]
OTHER_TYPES = {  # exceptions of other families thrown from the library's sources
    "std::runtime_error", "std::logic_error", "std::invalid_argument", "std::out_of_range", "std::length_error",
    "std::domain_error", "std::overflow_error", "std::system_error", "std::bad_alloc", "CLI::ValidationError",
    "CLI::ParseError", "CLI::ConversionError", "CLI::RuntimeError", "CLI::CallForHelp",
}
DEVICE_MACROS = {  # macro -> (what fails, message)
    "DTR_CUDA_CHECK": ("a CUDA runtime call fails", "<call> failed: <cudaGetErrorName>: <cudaGetErrorString>"),
    "DTR_CUDA_CHECK_LAUNCH": ("a kernel launch fails (cudaGetLastError)",
                              "cudaGetLastError() failed: <cudaGetErrorName>: <cudaGetErrorString>"),
    "DTR_CUBLAS_CHECK": ("a cuBLAS call fails", "<call> failed: <cublasGetStatusName>: <cublasGetStatusString>"),
    "DTR_CUDNN_CHECK": ("a cuDNN call fails", "<call> failed: <cudnnGetErrorString>"),
}
KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype", "static_assert",
            "noexcept", "requires", "throw", "new", "delete", "case", "do", "else", "try"}
MESSAGE_CHARS = 160
TRIGGER_CHARS = 90
MIN_MATCH = 10  # literal characters of a message a test literal must match
GAP = 48  # the most characters a value (…) stands for when matching
GENERIC = 8  # a text in more sites' messages than this does not make a list of parts name a site
GRAM = 5
MAX_TESTS_SHOWN = 4
ELLIPSIS = "\u2026"

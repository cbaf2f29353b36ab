// dtr: Dynamic Tensor Rematerialization. The C++ umbrella header: include this one.
#pragma once

#include "dtr/budget.h"
#include "dtr/caching_allocator.h"
#include "dtr/check.h"
#include "dtr/computation.h"
#include "dtr/config.h"
#include "dtr/device.h"
#include "dtr/error.h"
#include "dtr/gradients.h"
#include "dtr/kernel_observer.h"
#include "dtr/memory_resource.h"
#include "dtr/op.h"
#include "dtr/ops.h"
#include "dtr/runtime.h"
#include "dtr/sim.h"
#include "dtr/trace_generator.h"
#include "dtr/version.h"

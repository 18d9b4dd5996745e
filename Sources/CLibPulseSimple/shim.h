#ifndef CLIBPULSESIMPLE_SHIM_H
#define CLIBPULSESIMPLE_SHIM_H

#include <pulse/simple.h>
#include <pulse/error.h>

#endif

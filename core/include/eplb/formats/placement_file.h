// Empty: placement files are read and written by one module, eplb/io/placement_files.h. Kept
// only until tools/eplb/cmd_plan.cpp, which includes both, drops this include; then delete it.
#pragma once

// The whole public API of stave.
#pragma once
#include "stave/engine.h"
#include "stave/errors.h"
#include "stave/language_model.h"
#include "stave/options.h"
#include "stave/request.h"

#pragma once
// The quantization table between the engine (engine/quant/quant_table.h) and the view
// (ui/quant_table_types.h): the same fields both ways (one list of field pairs walked in
// either direction, speeds' runs included), so a table loaded and exported again is the
// table that was loaded.
#include "engine/quant/quant_table.h"
#include "ui/quant_table_types.h"

namespace kvs::app {

ui::QuantTableInfo toView(const QuantTable& t);
QuantTable fromView(const ui::QuantTableInfo& t);

}  // namespace kvs::app

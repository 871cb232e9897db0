#pragma once
// The window's dark theme (View > Theme > Dark). The widget tests switch to the same
// palette to check that views follow it (backgrounds from Base, text from Text) and to
// save dark screenshots.
#include <QPalette>

namespace kvs::ui {

QPalette dark_palette();

}  // namespace kvs::ui

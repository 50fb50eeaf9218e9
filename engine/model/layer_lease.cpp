#include "model/layer_lease.h"

namespace k3 {

LayerLease::LayerLease(Model& m, int il) : m_(m), il_(il) {
    const uint8_t* run = nullptr;
    status_ = m.store.acquire_layer(il, &run);
    if (!status_.ok()) return;
    acquired_ = true;
    widen_layer_vectors(m.cfg, m.layouts[size_t(il)], run, m.vectors[size_t(il)]);
    weights_ = bind_layer(m.layouts[size_t(il)], run, m.vectors[size_t(il)]);
}

LayerLease::~LayerLease() {
    if (acquired_) m_.store.release_layer(il_);
}

}  // namespace k3

// A decoder layer's weights for one step of forward(): acquires the layer's run from the weight
// store, widens its small vectors the first time the layer is seen, binds the views, and gives
// the run back to the store when it goes out of scope (on every return path).
#pragma once
#include "k3/status.h"
#include "model/model.h"
#include "weights/layer_views.h"

namespace k3 {

class LayerLease {
public:
    LayerLease(Model& m, int il);
    ~LayerLease();
    LayerLease(const LayerLease&) = delete;
    LayerLease& operator=(const LayerLease&) = delete;

    // Not ok when the store could not supply the layer (IoError); weights() is empty then.
    const Status& status() const { return status_; }
    const LayerWeights& weights() const { return weights_; }

private:
    Model& m_;
    int il_;
    bool acquired_ = false;
    Status status_;
    LayerWeights weights_{};
};

}  // namespace k3

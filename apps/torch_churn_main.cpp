// torch_churn's entry point: the program (apps/torch_churn.cpp) with the LibTorch twin as trainer.
#include "apps/torch_churn.hpp"
#include "models/torch/torch_twin.hpp"

int main(int argc, char** argv) {
  return fplab::app::torch_churn_main(argc, argv, &fplab::models::torch_twin::train,
                                      [](std::string* why) { return fplab::models::torch_twin::cuda_available(why); });
}

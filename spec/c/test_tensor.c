#include "attn.h"
#include "check.h"
int main(void) {
  attn_tensor *t = NULL;
  int64_t shape[2] = {2, 3};
  CHECK_OK(attn_zeros(2, shape, &t));
  CHECK(attn_tensor_numel(t) == 6);
  attn_tensor_release(t);
  return check_summary();
}

local core = require "attn.core"
return core

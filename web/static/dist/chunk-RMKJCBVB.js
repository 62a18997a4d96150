import{a}from"./chunk-ZGPVPJFF.js";import"./chunk-SHDSSOQO.js";import"./chunk-QH3SRDGB.js";export{a as expressionInterpreter};
